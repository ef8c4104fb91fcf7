// etcdbrctl's flags: gardener's names, defaults and per-command groups; the argument list
// etcd-druid gives the sidecar; the warnings for flags accepted without effect.
#include "etcdw/sidecar/options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace etcdw::sidecar {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using Args = std::vector<std::string>;
using Outcome = common::FlagSet::Outcome;

// Registers `command`'s flags, parses `args` and finishes them; the parse result is kept.
struct Parsed {
  explicit Parsed(Command command, const Args& args) : flags("etcdbrctl") {
    RegisterFlags(command, flags, &o);
    result = flags.Parse(args);
    FinishServerFlags(&o);
  }
  common::FlagSet flags;
  ServerOptions o;
  common::FlagSet::ParseResult result;
};

// The arguments etcd-druid's StatefulSet builder gives the backup-restore container of a
// 3-member etcd with client TLS, backup TLS, an S3 store, LimitBased GC and the runtime
// components (leases, service endpoints) enabled; values formatted as druid formats them
// (Go durations from metav1.Duration.String(), quantities as plain integers).
const Args kDruidTlsS3Args = {"--server-port=8080",
                              "--enable-snapshot-lease-renewal=true",
                              "--full-snapshot-lease-name=etcd-main-full-snap",
                              "--delta-snapshot-lease-name=etcd-main-delta-snap",
                              "--storage-provider=S3",
                              "--store-prefix=shoot--dev--foo/etcd-main",
                              "--store-endpoint-override=https://s3.eu-west-1.example.com",
                              "--schedule=0 */24 * * *",
                              "--delta-snapshot-period=5m0s",
                              "--delta-snapshot-retention-period=72h0m0s",
                              "--delta-snapshot-memory-limit=104857600",
                              "--garbage-collection-policy=LimitBased",
                              "--max-backups=7",
                              "--garbage-collection-period=12h0m0s",
                              "--compress-snapshots=true",
                              "--compression-policy=gzip",
                              "--etcd-snapshot-timeout=15m",
                              "--defragmentation-schedule=48 22 * * *",
                              "--etcd-defrag-timeout=15m",
                              "--auto-compaction-mode=periodic",
                              "--auto-compaction-retention=30m",
                              "--cacert=/var/etcd/ssl/ca/bundle.crt",
                              "--cert=/var/etcd/ssl/client/tls.crt",
                              "--key=/var/etcd/ssl/client/tls.key",
                              "--insecure-transport=false",
                              "--insecure-skip-tls-verify=false",
                              "--endpoints=https://etcd-main-local:2379",
                              "--service-endpoints=https://etcd-main-client:2379",
                              "--server-cert=/var/etcdbr/ssl/server/tls.crt",
                              "--server-key=/var/etcdbr/ssl/server/tls.key",
                              "--data-dir=/var/etcd/data/new.etcd",
                              "--restoration-temp-snapshots-dir=/var/etcd/data/restoration.temp",
                              "--snapstore-temp-directory=/var/etcd/data/temp",
                              "--etcd-connection-timeout=5m",
                              "--use-etcd-wrapper=true",
                              "--enable-member-lease-renewal=true",
                              "--k8s-heartbeat-duration=10s",
                              "--embedded-etcd-quota-bytes=8589934592",
                              "--enable-profiling=true",
                              "--etcd-connection-timeout-leader-election=5s",
                              "--reelection-period=5s"};

// The same for a single member without TLS and a Local store, Exponential GC, compression off,
// a 6 GiB quota and revision-based compaction.
const Args kDruidPlainLocalArgs = {
    "--server-port=8080",
    "--storage-provider=Local",
    "--store-prefix=etcd-test",
    "--delta-snapshot-memory-limit=10485760",
    "--garbage-collection-policy=Exponential",
    "--compress-snapshots=false",
    "--compression-policy=lzw",
    "--etcd-snapshot-timeout=15m",
    "--etcd-defrag-timeout=15m",
    "--auto-compaction-mode=revision",
    "--auto-compaction-retention=1000",
    "--insecure-transport=true",
    "--insecure-skip-tls-verify=true",
    "--endpoints=http://etcd-test-local:2379",
    "--service-endpoints=http://etcd-test-client:2379",
    "--data-dir=/var/etcd/data/new.etcd",
    "--restoration-temp-snapshots-dir=/var/etcd/data/restoration.temp",
    "--snapstore-temp-directory=/var/etcd/data/temp",
    "--etcd-connection-timeout=5m",
    "--use-etcd-wrapper=true",
    "--enable-member-lease-renewal=true",
    "--k8s-heartbeat-duration=10s",
    "--embedded-etcd-quota-bytes=6442450944"};

TEST(ServerOptionsTest, DruidsArgumentsWithTlsAndS3Land) {
  Parsed p(Command::kServer, kDruidTlsS3Args);
  ASSERT_EQ(p.result.outcome, Outcome::kOk) << p.result.error;
  EXPECT_TRUE(p.result.positional.empty());
  ASSERT_TRUE(ValidateServerOptions(p.o).ok()) << ValidateServerOptions(p.o).message();
  const ServerOptions& o = p.o;
  EXPECT_EQ(o.http.port, 8080);
  EXPECT_EQ(o.http.cert_file, "/var/etcdbr/ssl/server/tls.crt");
  EXPECT_EQ(o.http.key_file, "/var/etcdbr/ssl/server/tls.key");
  EXPECT_TRUE(o.http.enable_profiling);
  EXPECT_TRUE(o.leases.snapshot_lease_renewal);
  EXPECT_EQ(o.leases.full_lease_name, "etcd-main-full-snap");
  EXPECT_EQ(o.leases.delta_lease_name, "etcd-main-delta-snap");
  EXPECT_TRUE(o.leases.member_lease_renewal);
  EXPECT_EQ(o.leases.heartbeat, seconds(10));
  EXPECT_EQ(o.store.provider, "S3");
  EXPECT_EQ(o.store.prefix, "shoot--dev--foo/etcd-main");
  EXPECT_EQ(o.store.endpoint_override, "https://s3.eu-west-1.example.com");
  EXPECT_EQ(o.store.temp_dir, "/var/etcd/data/temp");
  EXPECT_EQ(o.snapshotter.schedule, "0 */24 * * *");
  EXPECT_EQ(o.snapshotter.delta_period, minutes(5));
  EXPECT_EQ(o.snapshotter.delta_retention, hours(72));
  EXPECT_EQ(o.snapshotter.delta_memory_limit, 104857600);
  EXPECT_EQ(o.snapshotter.gc_policy, "LimitBased");
  EXPECT_EQ(o.snapshotter.max_backups, 7);
  EXPECT_EQ(o.snapshotter.gc_period, hours(12));
  EXPECT_EQ(o.EffectiveCompression(), Compression::kGzip);
  EXPECT_EQ(o.etcd.snapshot_timeout, minutes(15));
  EXPECT_EQ(o.etcd.defrag_timeout, minutes(15));
  EXPECT_EQ(o.etcd.connection_timeout, minutes(5));
  EXPECT_EQ(o.defragmentation_schedule, "48 22 * * *");
  EXPECT_EQ(o.restoration.auto_compaction_mode, "periodic");
  EXPECT_EQ(o.restoration.auto_compaction_retention, "30m");
  EXPECT_EQ(o.restoration.embedded_etcd_quota_bytes, int64_t{8589934592});
  EXPECT_EQ(o.etcd.ca_file, "/var/etcd/ssl/ca/bundle.crt");
  EXPECT_EQ(o.etcd.cert_file, "/var/etcd/ssl/client/tls.crt");
  EXPECT_EQ(o.etcd.key_file, "/var/etcd/ssl/client/tls.key");
  EXPECT_FALSE(o.etcd.insecure_transport);
  EXPECT_FALSE(o.etcd.insecure_skip_verify);
  EXPECT_TRUE(o.etcd.UseTls());
  EXPECT_EQ(o.etcd.endpoints, Args{"https://etcd-main-local:2379"});
  EXPECT_EQ(o.etcd.service_endpoints, Args{"https://etcd-main-client:2379"});
  EXPECT_EQ(o.restoration.data_dir, "/var/etcd/data/new.etcd");
  EXPECT_EQ(o.restoration.temp_dir, "/var/etcd/data/restoration.temp");
  EXPECT_TRUE(o.use_etcd_wrapper);
  EXPECT_EQ(o.leader_election_timeout, seconds(5));
  EXPECT_EQ(o.reelection_period, seconds(5));
}

TEST(ServerOptionsTest, DruidsArgumentsWithoutTlsAndALocalStoreLand) {
  Parsed p(Command::kServer, kDruidPlainLocalArgs);
  ASSERT_EQ(p.result.outcome, Outcome::kOk) << p.result.error;
  ASSERT_TRUE(ValidateServerOptions(p.o).ok()) << ValidateServerOptions(p.o).message();
  const ServerOptions& o = p.o;
  EXPECT_EQ(o.store.provider, "Local");
  EXPECT_EQ(o.store.prefix, "etcd-test");
  EXPECT_EQ(o.snapshotter.gc_policy, "Exponential");
  EXPECT_EQ(o.EffectiveCompression(), Compression::kNone);
  EXPECT_EQ(o.restoration.auto_compaction_mode, "revision");
  EXPECT_EQ(o.restoration.auto_compaction_retention, "1000");
  EXPECT_EQ(o.restoration.embedded_etcd_quota_bytes, int64_t{6442450944});
  EXPECT_TRUE(o.etcd.insecure_transport);
  EXPECT_TRUE(o.etcd.insecure_skip_verify);
  EXPECT_FALSE(o.etcd.UseTls());
  EXPECT_EQ(o.etcd.endpoints, Args{"http://etcd-test-local:2379"});
  EXPECT_FALSE(o.leases.snapshot_lease_renewal);
}

TEST(ServerOptionsTest, DefaultsAreGardeners) {
  Parsed p(Command::kServer, {});
  ASSERT_EQ(p.result.outcome, Outcome::kOk);
  ASSERT_TRUE(ValidateServerOptions(p.o).ok()) << ValidateServerOptions(p.o).message();
  const ServerOptions& o = p.o;
  EXPECT_EQ(o.etcd.endpoints, Args{"http://127.0.0.1:2379"});
  EXPECT_TRUE(o.etcd.service_endpoints.empty());
  EXPECT_EQ(o.etcd.connection_timeout, seconds(30));
  EXPECT_EQ(o.etcd.snapshot_timeout, minutes(15));
  EXPECT_EQ(o.etcd.defrag_timeout, minutes(8));
  EXPECT_TRUE(o.etcd.insecure_transport);
  EXPECT_TRUE(o.etcd.insecure_skip_verify);  // gardener's quirk: insecure-transport's default
  EXPECT_EQ(o.http.port, 8080);
  EXPECT_EQ(o.snapshotter.schedule, "0 */1 * * *");
  EXPECT_EQ(o.snapshotter.delta_period, seconds(20));
  EXPECT_EQ(o.snapshotter.delta_memory_limit, 10 << 20);
  EXPECT_EQ(o.snapshotter.gc_period, minutes(1));
  EXPECT_EQ(o.snapshotter.gc_policy, "Exponential");
  EXPECT_EQ(o.snapshotter.max_backups, 7);
  EXPECT_EQ(o.store.temp_dir, "/tmp");
  EXPECT_EQ(o.store.max_parallel_chunk_uploads, 5);
  EXPECT_EQ(o.store.min_chunk_size, 5 << 20);
  EXPECT_EQ(o.EffectiveCompression(), Compression::kGzip);
  EXPECT_EQ(o.restoration.initial_cluster, "default=http://localhost:2380");
  EXPECT_EQ(o.restoration.initial_cluster_token, "etcd-cluster");
  EXPECT_EQ(o.restoration.data_dir, "default.etcd");
  EXPECT_EQ(o.restoration.temp_dir, "default.restoration.tmp");
  EXPECT_EQ(o.restoration.initial_advertise_peer_urls, Args{"http://localhost:2380"});
  EXPECT_EQ(o.restoration.max_fetchers, 6);
  EXPECT_EQ(o.restoration.max_call_send_message_size, 10 << 20);
  EXPECT_EQ(o.restoration.max_request_bytes, 10 << 20);
  EXPECT_EQ(o.restoration.max_txn_ops, 10240);
  EXPECT_EQ(o.restoration.embedded_etcd_quota_bytes, int64_t{8} << 30);
  EXPECT_EQ(o.restoration.auto_compaction_mode, "periodic");
  EXPECT_EQ(o.restoration.auto_compaction_retention, "30m");
  EXPECT_EQ(o.backoff.multiplier, 2);
  EXPECT_EQ(o.backoff.attempt_limit, 6);
  EXPECT_EQ(o.backoff.threshold, seconds(128));
  EXPECT_FALSE(o.secondary.sync_enabled);
  EXPECT_EQ(o.secondary.sync_period, hours(1));
  EXPECT_EQ(o.secondary.store.temp_dir, "/tmp");
  EXPECT_EQ(o.reelection_period, seconds(5));
  EXPECT_EQ(o.leader_election_timeout, seconds(5));
  EXPECT_EQ(o.defragmentation_schedule, "0 0 */3 * *");
  EXPECT_FALSE(o.use_etcd_wrapper);
  EXPECT_EQ(o.log_level, "4");
  EXPECT_TRUE(o.config_file.empty());
}

// Whether `command` accepts `flag` (given with a value it can parse).
bool Accepts(Command command, const std::string& flag) {
  Parsed p(command, {flag});
  return p.result.outcome == Outcome::kOk;
}

TEST(ServerOptionsTest, EachCommandHasGardenersFlagGroups) {
  // server: every group.
  for (const char* f :
       {"--config-file=/etc/br.yaml", "--log-level=5", "--endpoints=http://a:2379", "-p=9000",
        "--schedule=@hourly", "--store-container=c", "--embedded-etcd-quota-bytes=1",
        "--compress-snapshots=false", "--k8s-heartbeat-duration=1m", "--reelection-period=9s",
        "--backoff-multiplier=3", "--secondary-storage-provider=S3",
        "--secondary-backup-sync-period=2h", "--defragmentation-schedule=@daily",
        "--use-etcd-wrapper"}) {
    EXPECT_TRUE(Accepts(Command::kServer, f)) << f;
  }
  EXPECT_FALSE(Accepts(Command::kServer, "--validation-mode=full"));

  // snapshot: etcd connection, store, snapshotter, compression, back-off, defragmentation.
  for (const char* f :
       {"--endpoints=http://a:2379", "--insecure-skip-tls-verify=false", "--storage-provider=Local",
        "--min-chunk-size=6000000", "-s=@daily", "--compression-policy=zlib",
        "--backoff-threshold-time=1m", "--defragmentation-schedule=@daily", "--log-level=debug"}) {
    EXPECT_TRUE(Accepts(Command::kSnapshot, f)) << f;
  }
  for (const char* f : {"--data-dir=x", "--server-port=1", "--enable-member-lease-renewal",
                        "--secondary-storage-provider=S3", "--config-file=x",
                        "--reelection-period=9s", "--use-etcd-wrapper"}) {
    EXPECT_FALSE(Accepts(Command::kSnapshot, f)) << f;
  }

  // restore: restoration and store.
  for (const char* f : {"--initial-cluster=a=http://a:2380", "-d=x", "--max-fetchers=2",
                        "--auto-compaction-retention=1h", "--storage-provider=Local",
                        "--snapstore-temp-directory=/t"}) {
    EXPECT_TRUE(Accepts(Command::kRestore, f)) << f;
  }
  for (const char* f : {"--endpoints=http://a:2379", "--schedule=@daily", "--server-port=1",
                        "--validation-mode=full", "--compress-snapshots=false"}) {
    EXPECT_FALSE(Accepts(Command::kRestore, f)) << f;
  }

  // initialize: validation mode, restoration, store, etcd connection.
  for (const char* f : {"--validation-mode=sanity", "--name=m", "--store-prefix=p",
                        "--service-endpoints=http://b:2379", "--cacert=/ca"}) {
    EXPECT_TRUE(Accepts(Command::kInitialize, f)) << f;
  }
  for (const char* f : {"--schedule=@daily", "--server-port=1", "--defragmentation-schedule=x",
                        "--backoff-multiplier=2", "--secondary-backup-sync-enabled"}) {
    EXPECT_FALSE(Accepts(Command::kInitialize, f)) << f;
  }

  // compact: restoration, store, and what etcd-druid's compaction job adds.
  for (const char* f :
       {"--data-dir=/var/etcd/data/compaction.etcd", "--embedded-etcd-quota-bytes=8589934592",
        "--restoration-temp-snapshots-dir=/t", "--snapstore-temp-directory=/t",
        "--store-endpoint-override=http://s3:9000", "--defragment=false",
        "--etcd-snapshot-timeout=30m", "--etcd-defrag-timeout=8m",
        "--enable-snapshot-lease-renewal=true", "--full-snapshot-lease-name=f",
        "--delta-snapshot-lease-name=d", "--metrics-scrape-wait-duration=1m"}) {
    EXPECT_TRUE(Accepts(Command::kCompact, f)) << f;
  }
  for (const char* f : {"--endpoints=http://a:2379", "--schedule=@daily", "--server-port=1",
                        "--validation-mode=full", "--enable-member-lease-renewal"}) {
    EXPECT_FALSE(Accepts(Command::kCompact, f)) << f;
  }
}

// etcd-druid's copy job (etcdcopybackupstask/reconciler.go): the target store's flags, then
// the source's with the "source-" prefix, then the copier's.
TEST(ServerOptionsTest, CopyTakesDruidsArgumentsAndCompletesTheSourceFromTheTarget) {
  Parsed p(Command::kCopy,
           {"--snapstore-temp-directory=/home/nonroot/data/tmp", "--storage-provider=S3",
            "--store-prefix=shoot--dev--foo/etcd-main", "--store-container=target-bucket",
            "--store-endpoint-override=https://s3.example.com", "--source-storage-provider=Local",
            "--source-store-container=/backups", "--max-backup-age=7", "--max-backups-to-copy=3",
            "--wait-for-final-snapshot=true", "--wait-for-final-snapshot-timeout=5m0s",
            "--max-parallel-copy-operations=4"});
  ASSERT_EQ(p.result.outcome, Outcome::kOk) << p.result.error;
  ASSERT_TRUE(ValidateServerOptions(p.o).ok()) << ValidateServerOptions(p.o).message();
  EXPECT_EQ(p.o.store.provider, "S3");
  EXPECT_EQ(p.o.store.env_prefix, "");
  EXPECT_EQ(p.o.copy.source.provider, "Local");
  EXPECT_EQ(p.o.copy.source.container, "/backups");
  EXPECT_EQ(p.o.copy.source.env_prefix, "SOURCE_");
  // Not given: the target's prefix and temporary directory.
  EXPECT_EQ(p.o.copy.source.prefix, "shoot--dev--foo/etcd-main");
  EXPECT_EQ(p.o.copy.source.temp_dir, "/home/nonroot/data/tmp");
  EXPECT_EQ(p.o.copy.max_backup_age, 7);
  EXPECT_EQ(p.o.copy.max_backups, 3);
  EXPECT_TRUE(p.o.copy.wait_for_final_snapshot);
  EXPECT_EQ(p.o.copy.wait_for_final_snapshot_timeout, std::chrono::minutes(5));
  EXPECT_EQ(p.o.copy.max_parallel_copy_operations, 4);

  // Only the target given: the source is the same provider under the same prefix.
  Parsed same(Command::kCopy,
              {"--storage-provider=Local", "--store-prefix=p", "--source-store-prefix=old",
               "--source-snapstore-temp-directory=/t"});
  ASSERT_EQ(same.result.outcome, Outcome::kOk) << same.result.error;
  EXPECT_EQ(same.o.copy.source.provider, "Local");
  EXPECT_EQ(same.o.copy.source.prefix, "old");
  EXPECT_EQ(same.o.copy.source.temp_dir, "/t");
  EXPECT_EQ(same.o.copy.max_backups, -1);
  EXPECT_EQ(same.o.copy.max_backup_age, -1);
  EXPECT_EQ(same.o.copy.max_parallel_copy_operations, 10);
  EXPECT_FALSE(same.o.copy.wait_for_final_snapshot);

  for (const char* f : {"--endpoints=http://a:2379", "--data-dir=/d", "--schedule=@daily"}) {
    EXPECT_FALSE(Accepts(Command::kCopy, f)) << f;
  }
  // gardener's copierOptions.validate, one message per problem.
  Parsed bad(Command::kCopy,
             {"--max-backups-to-copy=-2", "--max-backup-age=-5", "--max-parallel-copy-operations=0",
              "--wait-for-final-snapshot-timeout=-1s", "--source-min-chunk-size=1",
              "--source-storage-provider=Blob"});
  ASSERT_EQ(bad.result.outcome, Outcome::kOk) << bad.result.error;
  EXPECT_EQ(ValidateServerOptions(bad.o).message(),
            "--max-backups-to-copy must not be less than -1\n"
            "--max-backup-age must not be less than -1\n"
            "--max-parallel-copy-operations must be greater than 0\n"
            "--wait-for-final-snapshot-timeout must not be less than 0\n"
            "--source-min-chunk-size must be at least 5242880 (5 MiB)\n"
            "--source-storage-provider: unsupported storage provider \"Blob\" (supported: "
            "Local, S3, ABS)");
}

TEST(ServerOptionsTest, ListFlagsBehaveAsPflags) {
  // StringSlice: comma lists, repeated occurrences append, the shorthand shares the list.
  Parsed p(Command::kServer, {"--endpoints=http://a:1,http://b:2", "-e", "http://c:3",
                              "--initial-advertise-peer-urls=http://x:2380",
                              "--initial-advertise-peer-urls", "http://y:2380"});
  ASSERT_EQ(p.result.outcome, Outcome::kOk) << p.result.error;
  EXPECT_EQ(p.o.etcd.endpoints, (Args{"http://a:1", "http://b:2", "http://c:3"}));
  EXPECT_TRUE(p.flags.IsSet("endpoints"));
  // StringArray: each occurrence one item, replacing the default.
  EXPECT_EQ(p.o.restoration.initial_advertise_peer_urls, (Args{"http://x:2380", "http://y:2380"}));
  EXPECT_EQ(RestoreTargetOf(p.o.restoration).initial_advertise_peer_urls,
            (Args{"http://x:2380", "http://y:2380"}));
}

TEST(ServerOptionsTest, LogLevelTakesGardenersNumbersAndOurNames) {
  EXPECT_EQ(LogLevelOf("4").value(), log::Level::kInfo);
  EXPECT_EQ(LogLevelOf("5").value(), log::Level::kDebug);
  EXPECT_EQ(LogLevelOf("6").value(), log::Level::kDebug);
  EXPECT_EQ(LogLevelOf("3").value(), log::Level::kWarn);
  EXPECT_EQ(LogLevelOf("2").value(), log::Level::kError);
  EXPECT_EQ(LogLevelOf("0").value(), log::Level::kError);
  EXPECT_EQ(LogLevelOf("debug").value(), log::Level::kDebug);
  EXPECT_EQ(LogLevelOf("warn").value(), log::Level::kWarn);
  EXPECT_FALSE(LogLevelOf("loud").ok());
  EXPECT_FALSE(LogLevelOf("-1").ok());
  EXPECT_FALSE(LogLevelOf("4294967296").ok());
  EXPECT_TRUE(LogLevelOf("4294967295").ok());
  Parsed bad(Command::kRestore, {"--log-level=verbose"});
  Status st = ValidateServerOptions(bad.o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--log-level"), std::string::npos) << st.message();
}

TEST(ServerOptionsTest, NewFlagsAreValidatedAsGardenersAre) {
  Parsed p(Command::kServer,
           {"--auto-compaction-mode=hourly", "--embedded-etcd-quota-bytes=0",
            "--max-call-send-message-size=0", "--backoff-multiplier=0", "--backoff-attempt-limit=0",
            "--backoff-threshold-time=0s", "--max-txn-ops=-1", "--secondary-backup-sync-enabled",
            "--secondary-min-chunk-size=1"});
  ASSERT_EQ(p.result.outcome, Outcome::kOk) << p.result.error;
  Status st = ValidateServerOptions(p.o);
  ASSERT_FALSE(st.ok());
  for (const char* flag :
       {"--auto-compaction-mode", "--embedded-etcd-quota-bytes", "--max-call-send-message-size",
        "--backoff-multiplier", "--backoff-attempt-limit", "--backoff-threshold-time",
        "--max-txn-ops", "--secondary-min-chunk-size"}) {
    EXPECT_NE(st.message().find(flag), std::string::npos) << flag << ": " << st.message();
  }
  // The secondary store's settings are checked only when the sync is on, as gardener's.
  Parsed off(Command::kServer, {"--secondary-min-chunk-size=1"});
  EXPECT_TRUE(ValidateServerOptions(off.o).ok()) << ValidateServerOptions(off.o).message();
}

// The lines of `text` that contain `needle`.
int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (text.substr(start, end - start).find(needle) != std::string::npos) ++n;
    start = end + 1;
  }
  return n;
}

// Runs WarnFlagsWithoutEffect for `args` with warnings enabled; returns what it logged.
std::string WarningsFor(Command command, const Args& args, std::vector<std::string>* warned) {
  Parsed p(command, args);
  EXPECT_EQ(p.result.outcome, Outcome::kOk) << p.result.error;
  const log::Level saved = log::GetLevel();
  log::SetLevel(log::Level::kInfo);
  ::testing::internal::CaptureStderr();
  *warned = WarnFlagsWithoutEffect(command, p.flags);
  std::string out = ::testing::internal::GetCapturedStderr();
  log::SetLevel(saved);
  return out;
}

TEST(WarnFlagsWithoutEffectTest, OneWarningNamesEachGivenFlagWithoutEffect) {
  std::vector<std::string> warned;
  const std::string out =
      WarningsFor(Command::kServer,
                  {"--etcd-username=u", "--backoff-multiplier=2", "--max-fetchers=3",
                   "--secondary-backup-sync-enabled", "--secondary-storage-provider=S3",
                   "--config-file=/etc/br.yaml", "--schedule=@daily", "--storage-provider=Local",
                   "--use-etcd-wrapper", "--enable-member-lease-renewal"},
                  &warned);
  // The secondary store's flags act (sidecar/backup_sync.h): not named.
  EXPECT_EQ(warned, (std::vector<std::string>{"config-file", "etcd-username", "max-fetchers",
                                              "backoff-multiplier"}));
  EXPECT_EQ(CountLines(out, "has no effect"), 4) << out;
  for (const auto& name : warned) {
    EXPECT_EQ(CountLines(out, "\"--" + name + "\""), 1) << name << "\n" << out;
  }
  // A flag given at its default value counts as given; flags not given are not named.
  EXPECT_EQ(out.find("--etcd-password"), std::string::npos) << out;
  EXPECT_EQ(out.find("--schedule"), std::string::npos) << out;
  EXPECT_EQ(out.find("--storage-provider\""), std::string::npos) << out;
  EXPECT_EQ(out.rfind("{\"level\":\"warn\"", 0), 0u) << out;
}

TEST(WarnFlagsWithoutEffectTest, DruidsArgumentsWarnOnlyForTheEmbeddedEtcdAndProfiling) {
  std::vector<std::string> warned;
  const std::string out = WarningsFor(Command::kServer, kDruidTlsS3Args, &warned);
  EXPECT_EQ(warned,
            (std::vector<std::string>{"enable-profiling", "embedded-etcd-quota-bytes",
                                      "auto-compaction-mode", "auto-compaction-retention"}));
  EXPECT_EQ(CountLines(out, "has no effect"), 4) << out;
}

TEST(WarnFlagsWithoutEffectTest, PerCommand) {
  std::vector<std::string> warned;
  WarningsFor(Command::kSnapshot,
              {"--defragmentation-schedule=@daily", "--backoff-attempt-limit=2"}, &warned);
  EXPECT_EQ(warned,
            (std::vector<std::string>{"backoff-attempt-limit", "defragmentation-schedule"}));
  WarningsFor(Command::kRestore, {"--max-txn-ops=5", "--skip-hash-check"}, &warned);
  EXPECT_EQ(warned, (std::vector<std::string>{"max-txn-ops"}));
  WarningsFor(Command::kInitialize, {"--etcd-password=p", "--validation-mode=sanity"}, &warned);
  EXPECT_EQ(warned, (std::vector<std::string>{"etcd-password"}));
  WarningsFor(Command::kCompact,
              {"--etcd-snapshot-timeout=30m", "--embedded-etcd-quota-bytes=1", "--defragment"},
              &warned);
  EXPECT_EQ(warned,
            (std::vector<std::string>{"embedded-etcd-quota-bytes", "etcd-snapshot-timeout"}));
  const std::string none = WarningsFor(Command::kServer, {}, &warned);
  EXPECT_TRUE(warned.empty());
  EXPECT_TRUE(none.empty()) << none;
}

}  // namespace
}  // namespace etcdw::sidecar
