// End-to-end tests: etcdctl 3.4 (Debian's etcd-client) against etcd-wrapper. Expected outputs
// are what etcdctl prints against etcd 3.4.23; DifferentialEtcdctlTest runs the same commands
// against a real etcd and compares the outputs directly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "servers.h"
#include "test_certs.h"

namespace etcdw::testing {
namespace {

using nlohmann::json;

// A member ID as etcdctl prints it (Go's %x).
std::string HexId(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

class EtcdctlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(member_.Start()) << member_.log(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "--- etcd-wrapper log ---\n" << member_.log();
  }

  // Runs etcdctl against the member; returns its exit status and output (stdout + stderr).
  int Ctl(const std::vector<std::string>& args, std::string* out, const std::string& input = "") {
    std::vector<std::string> argv = {"etcdctl", "--endpoints=" + member_.endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, out, std::chrono::seconds(30), input);
  }
  // Runs etcdctl; stdout and stderr apart.
  CmdResult Run(const std::vector<std::string>& args, const std::string& input = "") {
    return Etcdctl(member_, args, input);
  }
  // Runs etcdctl and expects success; returns stdout.
  std::string Ok(const std::vector<std::string>& args, const std::string& input = "") {
    CmdResult r = Run(args, input);
    EXPECT_EQ(r.rc, 0) << "etcdctl " << ::testing::PrintToString(args) << "\n" << r.Describe();
    return r.out;
  }
  json Json(const std::vector<std::string>& args) {
    std::vector<std::string> a = args;
    a.push_back("-w");
    a.push_back("json");
    return ParseJson(Ok(a));
  }
  int64_t Revision() {
    json j = Json({"get", "nothing-here"});
    return j["header"]["revision"].get<int64_t>();
  }
  uint64_t MemberId() {
    json j = Json({"endpoint", "status"});
    return j[0]["Status"]["header"]["member_id"].get<uint64_t>();
  }

  Member member_{Member::Kind::kEtcdWrapper};
};

TEST_F(EtcdctlTest, PutGetDelete) {
  std::string out;
  ASSERT_EQ(Ctl({"put", "foo", "bar"}, &out), 0) << out;
  EXPECT_EQ(out, "OK\n");
  ASSERT_EQ(Ctl({"get", "foo"}, &out), 0) << out;
  EXPECT_EQ(out, "foo\nbar\n");
  ASSERT_EQ(Ctl({"del", "foo"}, &out), 0) << out;
  EXPECT_EQ(out, "1\n");
}

TEST_F(EtcdctlTest, GetOptions) {
  EXPECT_EQ(Ok({"put", "foo", "bar"}), "OK\n");    // rev 2
  EXPECT_EQ(Ok({"put", "foo2", "bar2"}), "OK\n");  // rev 3
  EXPECT_EQ(Ok({"put", "foo", "baz"}), "OK\n");    // rev 4
  EXPECT_EQ(Ok({"put", "other", "x"}), "OK\n");    // rev 5

  EXPECT_EQ(Ok({"get", "foo", "--prefix"}), "foo\nbaz\nfoo2\nbar2\n");
  EXPECT_EQ(Ok({"get", "foo", "--rev=2"}), "foo\nbar\n");
  EXPECT_EQ(Ok({"get", "foo", "--rev=3", "--prefix"}), "foo\nbar\nfoo2\nbar2\n");
  EXPECT_EQ(Ok({"get", "foo", "--prefix", "--limit", "1"}), "foo\nbaz\n");
  EXPECT_EQ(Ok({"get", "foo", "--prefix", "--keys-only"}), "foo\n\nfoo2\n\n");
  EXPECT_EQ(Ok({"get", "foo", "--prefix", "--print-value-only"}), "baz\nbar2\n");
  EXPECT_EQ(Ok({"get", "foo", "other"}), "foo\nbaz\nfoo2\nbar2\n");  // [foo, other)
  EXPECT_EQ(Ok({"get", "--from-key", "foo2", "--keys-only"}), "foo2\n\nother\n\n");
  EXPECT_EQ(Ok({"get", "", "--prefix", "--sort-by=MODIFY", "--order=DESCEND", "--keys-only"}),
            "other\n\nfoo\n\nfoo2\n\n");
  EXPECT_EQ(Ok({"get", "missing"}), "");
  EXPECT_EQ(Ok({"get", "foo", "--consistency=s"}), "foo\nbaz\n");

  json j = Json({"get", "foo", "--prefix"});
  EXPECT_EQ(j["header"]["revision"], 5);
  EXPECT_TRUE(j["header"].contains("cluster_id"));
  EXPECT_TRUE(j["header"].contains("member_id"));
  EXPECT_GE(j["header"]["raft_term"].get<int64_t>(), 1);
  EXPECT_EQ(j["count"], 2);
  EXPECT_FALSE(j.contains("more"));
  ASSERT_EQ(j["kvs"].size(), 2u);
  EXPECT_EQ(j["kvs"][0]["key"], "Zm9v");    // base64("foo")
  EXPECT_EQ(j["kvs"][0]["value"], "YmF6");  // base64("baz")
  EXPECT_EQ(j["kvs"][0]["create_revision"], 2);
  EXPECT_EQ(j["kvs"][0]["mod_revision"], 4);
  EXPECT_EQ(j["kvs"][0]["version"], 2);
  EXPECT_FALSE(j["kvs"][0].contains("lease"));
  EXPECT_EQ(j["kvs"][1]["key"], "Zm9vMg==");
  EXPECT_EQ(j["kvs"][1]["create_revision"], 3);

  j = Json({"get", "foo", "--prefix", "--limit=1"});
  EXPECT_EQ(j["more"], true);
  EXPECT_EQ(j["count"], 2);
  EXPECT_EQ(j["kvs"].size(), 1u);

  j = Json({"get", "foo", "--prefix", "--keys-only"});
  EXPECT_FALSE(j["kvs"][0].contains("value"));

  j = Json({"get", "missing"});
  EXPECT_FALSE(j.contains("kvs"));
  EXPECT_FALSE(j.contains("count"));
}

TEST_F(EtcdctlTest, PutOptions) {
  EXPECT_EQ(Ok({"put", "k", "v1"}), "OK\n");
  EXPECT_EQ(Ok({"put", "k", "v2", "--prev-kv"}), "OK\nk\nv1\n");
  EXPECT_EQ(Ok({"put", "k", "--ignore-value"}), "OK\n");
  EXPECT_EQ(Ok({"get", "k", "--print-value-only"}), "v2\n");

  CmdResult r = Run({"put", "absent", "--ignore-value"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: key not found") << r.Describe();

  json j = Json({"put", "k", "v3", "--prev-kv"});
  EXPECT_EQ(j["prev_kv"]["key"], "aw==");
  EXPECT_EQ(j["prev_kv"]["value"], "djI=");
  EXPECT_EQ(j["prev_kv"]["version"], 3);
  EXPECT_EQ(j["header"]["revision"], 5);
}

TEST_F(EtcdctlTest, DeleteOptions) {
  for (const char* k : {"a/1", "a/2", "a/3", "b"}) Ok({"put", k, std::string("v-") + k});
  EXPECT_EQ(Ok({"del", "a/1", "--prev-kv"}), "1\na/1\nv-a/1\n");
  EXPECT_EQ(Ok({"del", "a/1"}), "0\n");
  EXPECT_EQ(Ok({"del", "a/", "--prefix", "--prev-kv"}), "2\na/2\nv-a/2\na/3\nv-a/3\n");
  EXPECT_EQ(Ok({"get", "", "--prefix", "--keys-only"}), "b\n\n");
  EXPECT_EQ(Ok({"put", "c", "1"}), "OK\n");
  EXPECT_EQ(Ok({"del", "--from-key", "a"}), "2\n");
  EXPECT_EQ(Ok({"get", "", "--prefix"}), "");

  json j = Json({"del", "nothing"});
  EXPECT_FALSE(j.contains("deleted"));
  EXPECT_EQ(j["header"]["revision"], 9);
}

TEST_F(EtcdctlTest, TxnInteractive) {
  Ok({"put", "k1", "v1"});
  // Compares, a blank line, success requests, a blank line, failure requests, a blank line.
  EXPECT_EQ(Ok({"txn"}, "value(\"k1\") = \"v1\"\n\nput k2 v2\nget k1\n\nput k3 v3\n\n"),
            "SUCCESS\n\nOK\n\nk1\nv1\n");
  EXPECT_EQ(Ok({"get", "k2", "--print-value-only"}), "v2\n");
  EXPECT_EQ(Ok({"get", "k3"}), "");

  EXPECT_EQ(Ok({"txn"}, "value(\"k1\") = \"nope\"\n\nput k2 x\n\nput k3 v3\ndel k1\n\n"),
            "FAILURE\n\nOK\n\n1\n");
  EXPECT_EQ(Ok({"get", "k3", "--print-value-only"}), "v3\n");
  EXPECT_EQ(Ok({"get", "k2", "--print-value-only"}), "v2\n");
  EXPECT_EQ(Ok({"get", "k1"}), "");

  // Several compares (all must hold), version/create/mod compares and a range delete.
  int64_t rev = Revision();
  std::string txn = "version(\"k2\") = \"1\"\ncreate(\"k1\") = \"0\"\nmod(\"k3\") = \"" +
                    std::to_string(rev) + "\"\n\ndel k --prefix\n\n\n";
  EXPECT_EQ(Ok({"txn"}, txn), "SUCCESS\n\n2\n");
  EXPECT_EQ(Ok({"get", "", "--prefix"}), "");

  // Interactive mode prints its prompts.
  EXPECT_EQ(Ok({"txn", "-i"}, "create(\"zz\") = \"0\"\n\nput zz 1\n\n\n"),
            "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n"
            "SUCCESS\n\nOK\n");

  json j = ParseJson(Ok({"txn", "-w", "json"}, "mod(\"zz\") > \"0\"\n\nget zz\n\n\n"));
  EXPECT_EQ(j["succeeded"], true);
  ASSERT_EQ(j["responses"].size(), 1u);
  EXPECT_EQ(j["responses"][0]["Response"]["ResponseRange"]["kvs"][0]["value"], "MQ==");

  // A malformed compare is rejected by etcdctl itself; the store is unchanged.
  CmdResult r = Run({"txn"}, "bogus(\"k\") = \"1\"\n\n\n\n");
  EXPECT_NE(r.rc, 0) << r.Describe();
}

// Starts `etcdctl watch ARGS` writing to a log; Kill()ed by the destructor.
class Watcher {
 public:
  Watcher(const Member& m, const std::vector<std::string>& args, const std::string& log)
      : log_(log) {
    std::vector<std::string> argv = {"etcdctl", "--endpoints=" + m.endpoint(), "watch"};
    argv.insert(argv.end(), args.begin(), args.end());
    started_ = proc_.Start(argv, log_);
  }
  bool started() const { return started_; }
  std::string output() const { return ReadFile(log_); }
  // Waits until the output contains `text`.
  bool WaitFor(const std::string& text,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return testing::WaitUntil([&] { return Contains(output(), text); }, timeout);
  }
  Process& process() { return proc_; }

 private:
  std::string log_;
  Process proc_;
  bool started_ = false;
};

TEST_F(EtcdctlTest, WatchPrefixPrevKv) {
  Watcher w(member_, {"w", "--prefix", "--prev-kv"}, member_.dir() + "/watch.log");
  ASSERT_TRUE(w.started());
  // The watch exists once it reports a put of the sentinel key (put until it does).
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        Ok({"put", "w/sentinel", "s"});
        return w.WaitFor("w/sentinel", std::chrono::milliseconds(500));
      },
      std::chrono::seconds(30)))
      << w.output();
  Ok({"put", "nomatch", "x"});
  Ok({"put", "w1", "a"});
  Ok({"put", "w1", "b"});
  Ok({"del", "w1"});
  Ok({"put", "w2", "c"});
  std::string expected =
      "PUT\nw1\na\n"
      "PUT\nw1\na\nw1\nb\n"
      "DELETE\nw1\nb\nw1\n\n"
      "PUT\nw2\nc\n";
  ASSERT_TRUE(w.WaitFor(expected)) << w.output();
  std::string out = w.output();
  // Everything after the sentinel events is exactly the expected events.
  size_t pos = out.rfind("w/sentinel\ns\n");
  ASSERT_NE(pos, std::string::npos) << out;
  EXPECT_EQ(out.substr(pos + std::string("w/sentinel\ns\n").size()), expected);
  EXPECT_FALSE(Contains(out, "nomatch"));
}

TEST_F(EtcdctlTest, WatchRevisionReplay) {
  int64_t start = Revision() + 1;
  Ok({"put", "r", "1"});
  Ok({"put", "r", "2"});
  Ok({"del", "r"});
  Ok({"put", "rr", "3"});
  Watcher w(member_, {"r", "--rev=" + std::to_string(start)}, member_.dir() + "/watch.log");
  ASSERT_TRUE(w.started());
  ASSERT_TRUE(w.WaitFor("DELETE\nr\n\n")) << w.output();
  EXPECT_EQ(w.output(), "PUT\nr\n1\nPUT\nr\n2\nDELETE\nr\n\n");
  // Live events follow the replayed ones.
  Ok({"put", "r", "4"});
  ASSERT_TRUE(w.WaitFor("PUT\nr\n4\n")) << w.output();
  EXPECT_EQ(w.output(), "PUT\nr\n1\nPUT\nr\n2\nDELETE\nr\n\nPUT\nr\n4\n");

  // A prefix watch replaying with previous values.
  Watcher wp(member_, {"r", "--prefix", "--prev-kv", "--rev=" + std::to_string(start + 1)},
             member_.dir() + "/watch2.log");
  ASSERT_TRUE(wp.WaitFor("PUT\nr\n4\n")) << wp.output();
  EXPECT_EQ(wp.output(),
            "PUT\nr\n1\nr\n2\n"
            "DELETE\nr\n2\nr\n\n"
            "PUT\nrr\n3\n"
            "PUT\nr\n4\n");
}

TEST_F(EtcdctlTest, WatchCompactedRevision) {
  for (int i = 0; i < 5; ++i) Ok({"put", "c", std::to_string(i)});
  EXPECT_EQ(Ok({"compaction", "4"}), "compacted revision 4\n");
  CmdResult r =
      Etcdctl(member_.endpoint(), {"watch", "c", "--rev=2"}, "", std::chrono::seconds(20));
  EXPECT_NE(r.rc, 0) << r.Describe();
  EXPECT_NE(r.rc, -1) << "watch of a compacted revision did not end\n" << r.Describe();
  EXPECT_TRUE(Contains(r.err,
                       "watch was canceled (etcdserver: mvcc: required revision has been "
                       "compacted)"))
      << r.Describe();
}

TEST_F(EtcdctlTest, WatchStopsWhenServerStops) {
  Watcher w(member_, {"x"}, member_.dir() + "/watch.log");
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        Ok({"put", "x", "1"});
        return w.WaitFor("PUT\nx\n1\n", std::chrono::milliseconds(500));
      },
      std::chrono::seconds(30)));
  // A graceful stop ends with an open watch stream within the grace period.
  auto start = std::chrono::steady_clock::now();
  auto rc = member_.Stop(std::chrono::seconds(20));
  ASSERT_TRUE(rc.has_value()) << member_.log();
  EXPECT_EQ(*rc, 0) << member_.log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// The concurrency recipes of etcdctl (sessions on leases, ordered creates, watches).
TEST_F(EtcdctlTest, LockAndElect) {
  EXPECT_EQ(Ok({"lock", "mylock", "echo", "hi"}), "hi\n");

  // A holder keeps the lock until interrupted; a second locker waits for it.
  Process hold;
  std::string hold_log = member_.dir() + "/hold.log";
  ASSERT_TRUE(hold.Start({"etcdctl", "--endpoints=" + member_.endpoint(), "lock", "L"}, hold_log));
  ASSERT_TRUE(WaitUntil([&] { return Contains(ReadFile(hold_log), "L/"); })) << ReadFile(hold_log);
  CmdResult second;
  std::atomic<bool> second_done{false};
  std::thread t([&] {
    second = Run({"lock", "L", "echo", "second"});
    second_done = true;
  });
  // The waiter is queued behind the holder: its key shows up under the lock prefix.
  EXPECT_TRUE(WaitUntil([&] {
    return Lines(Ok({"get", "L/", "--prefix", "--keys-only"})).size() >= 4;
  })) << Ok({"get", "L/", "--prefix", "--keys-only"});
  EXPECT_FALSE(second_done.load());
  hold.Signal(SIGINT);  // etcdctl releases the lock and revokes its session lease
  EXPECT_TRUE(hold.Wait(std::chrono::seconds(20)).has_value());
  t.join();
  EXPECT_EQ(second.rc, 0) << second.Describe();
  EXPECT_EQ(second.out, "second\n");
  EXPECT_EQ(Ok({"get", "L/", "--prefix"}), "");

  // Election: a leader campaigns; an observer sees it.
  Process leader;
  std::string leader_log = member_.dir() + "/leader.log";
  ASSERT_TRUE(leader.Start(
      {"etcdctl", "--endpoints=" + member_.endpoint(), "elect", "E", "proposal-1"}, leader_log));
  ASSERT_TRUE(WaitUntil([&] { return Contains(ReadFile(leader_log), "proposal-1"); }))
      << ReadFile(leader_log);
  EXPECT_TRUE(std::regex_match(ReadFile(leader_log), std::regex("^E/[0-9a-f]+\nproposal-1\n$")))
      << ReadFile(leader_log);
  Process observer;
  std::string observer_log = member_.dir() + "/observer.log";
  ASSERT_TRUE(observer.Start({"etcdctl", "--endpoints=" + member_.endpoint(), "elect", "-l", "E"},
                             observer_log));
  EXPECT_TRUE(WaitUntil([&] { return Contains(ReadFile(observer_log), "proposal-1\n"); }))
      << ReadFile(observer_log);
  leader.Signal(SIGINT);
  EXPECT_TRUE(leader.Wait(std::chrono::seconds(20)).has_value());
  EXPECT_TRUE(WaitUntil([&] { return Ok({"get", "E/", "--prefix"}).empty(); }));
}

std::string LeaseIdOf(const std::string& grant_output) {
  std::smatch m;
  static const std::regex re("^lease ([0-9a-f]{16}) granted with TTL\\((\\d+)s\\)\n$");
  if (!std::regex_match(grant_output, m, re)) return "";
  return m[1];
}

TEST_F(EtcdctlTest, LeaseLifecycle) {
  std::string out = Ok({"lease", "grant", "100"});
  std::string id = LeaseIdOf(out);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_EQ(Ok({"put", "--lease=" + id, "lk", "lv"}), "OK\n");
  EXPECT_EQ(Ok({"put", "--lease=" + id, "lk2", "lv2"}), "OK\n");

  std::smatch m;
  out = Ok({"lease", "timetolive", id, "--keys"});
  std::regex ttl_keys("^lease " + id +
                      " granted with TTL\\(100s\\), remaining\\((\\d+)s\\), attached keys\\(\\[lk "
                      "lk2\\]\\)\n$");
  ASSERT_TRUE(std::regex_match(out, m, ttl_keys)) << out;
  EXPECT_GE(std::stoi(m[1]), 80);
  EXPECT_LE(std::stoi(m[1]), 100);
  out = Ok({"lease", "timetolive", id});
  EXPECT_TRUE(std::regex_match(
      out, std::regex("^lease " + id + " granted with TTL\\(100s\\), remaining\\(\\d+s\\)\n$")))
      << out;

  json j = Json({"lease", "timetolive", id, "--keys"});
  EXPECT_EQ(j["id"].get<uint64_t>(), std::stoull(id, nullptr, 16));
  EXPECT_EQ(j["granted-ttl"], 100);
  EXPECT_EQ(j["keys"], json::array({"bGs=", "bGsy"}));

  // A second lease; list shows both.
  std::string id2 = LeaseIdOf(Ok({"lease", "grant", "200"}));
  ASSERT_FALSE(id2.empty());
  out = Ok({"lease", "list"});
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0], "found 2 leases");
  std::vector<std::string> ids = {lines[1], lines[2]};
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want = {id, id2};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ids, want);

  EXPECT_EQ(Ok({"lease", "keep-alive", "--once", id}),
            "lease " + id + " keepalived with TTL(100)\n");

  EXPECT_EQ(Ok({"lease", "revoke", id}), "lease " + id + " revoked\n");
  EXPECT_EQ(Ok({"lease", "timetolive", id}), "lease " + id + " already expired\n");
  EXPECT_EQ(Ok({"get", "lk", "--prefix"}), "");
  out = Ok({"lease", "list"});
  EXPECT_EQ(out, "found 1 leases\n" + id2 + "\n");

  CmdResult r = Run({"lease", "revoke", id});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err),
            "Error: failed to revoke lease (etcdserver: requested lease not found)")
      << r.Describe();
  r = Run({"put", "--lease=1234", "x", "y"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: requested lease not found") << r.Describe();
  r = Run({"lease", "keep-alive", "--once", id});
  EXPECT_NE(r.rc, 0) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: requested lease not found") << r.Describe();
}

TEST_F(EtcdctlTest, LeaseExpiryDeletesKeys) {
  // The minimum TTL is ceil(1.5 x election timeout) = 2 s with the default settings.
  std::string id = LeaseIdOf(Ok({"lease", "grant", "2"}));
  ASSERT_FALSE(id.empty());
  Ok({"put", "--lease=" + id, "ephemeral", "1"});
  Ok({"put", "durable", "1"});
  EXPECT_EQ(Ok({"get", "ephemeral", "--print-value-only"}), "1\n");
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Ok({"get", "ephemeral"}).empty();
      },
      std::chrono::seconds(30)));
  EXPECT_EQ(Ok({"lease", "timetolive", id}), "lease " + id + " already expired\n");
  EXPECT_EQ(Ok({"get", "durable", "--print-value-only"}), "1\n");
}

TEST_F(EtcdctlTest, Compaction) {
  for (int i = 1; i <= 9; ++i) Ok({"put", "foo", "v" + std::to_string(i)});  // revs 2..10
  EXPECT_EQ(Ok({"compaction", "5"}), "compacted revision 5\n");
  EXPECT_EQ(Ok({"get", "foo", "--rev=5", "--print-value-only"}), "v4\n");
  EXPECT_EQ(Ok({"compaction", "--physical", "7"}), "compacted revision 7\n");

  CmdResult r = Run({"get", "foo", "--rev=3"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: required revision has been compacted")
      << r.Describe();
  EXPECT_TRUE(Contains(r.err, "code = OutOfRange")) << r.Describe();
  r = Run({"compaction", "6"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: required revision has been compacted")
      << r.Describe();
  r = Run({"get", "foo", "--rev=100"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: required revision is a future revision")
      << r.Describe();
  r = Run({"compaction", "100"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: required revision is a future revision")
      << r.Describe();

  EXPECT_EQ(Ok({"get", "foo", "--rev=7", "--print-value-only"}), "v6\n");
  EXPECT_EQ(Ok({"get", "foo", "--print-value-only"}), "v9\n");
  json j = Json({"endpoint", "hashkv"});
  EXPECT_EQ(j[0]["HashKV"]["compact_revision"], 7);
  // The compaction survives a restart.
  ASSERT_EQ(member_.Stop(), 0) << member_.log();
  ASSERT_TRUE(member_.Start()) << member_.log();
  r = Run({"get", "foo", "--rev=6"});
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: required revision has been compacted")
      << r.Describe();
  EXPECT_EQ(Ok({"get", "foo", "--rev=8", "--print-value-only"}), "v7\n");
}

TEST_F(EtcdctlTest, EndpointStatus) {
  Ok({"put", "a", "1"});
  std::string version = RunWrapper({"--version"}).out;
  json j = Json({"endpoint", "status"});
  ASSERT_TRUE(j.is_array() && j.size() == 1) << j.dump();
  EXPECT_EQ(j[0]["Endpoint"], member_.endpoint());
  const json& st = j[0]["Status"];
  ASSERT_TRUE(st.contains("version")) << j.dump();
  EXPECT_TRUE(Contains(version, "Compatible etcd Version: " + st["version"].get<std::string>()))
      << version << j.dump();
  uint64_t id = st["header"]["member_id"].get<uint64_t>();
  EXPECT_NE(id, 0u);
  EXPECT_EQ(st["leader"].get<uint64_t>(), id);
  EXPECT_GE(st["raftTerm"].get<uint64_t>(), 1u);
  EXPECT_GE(st["raftIndex"].get<uint64_t>(), 2u);
  EXPECT_EQ(st["raftAppliedIndex"], st["raftIndex"]);
  EXPECT_EQ(st["header"]["revision"], 2);
  EXPECT_GT(st["dbSize"].get<int64_t>(), 0);
  EXPECT_FALSE(st.contains("errors"));

  // Table form: endpoint, ID, version, size, is leader, is learner, term, index, applied.
  std::string out = Ok({"endpoint", "status"});
  auto fields = Lines(out);
  ASSERT_EQ(fields.size(), 1u) << out;
  std::regex row("^" + member_.endpoint() + ", " + HexId(id) + ", " +
                 st["version"].get<std::string>() + ", [0-9.]+ [kMG]?B, true, false, " +
                 std::to_string(st["raftTerm"].get<uint64_t>()) + ", \\d+, \\d+, $");
  EXPECT_TRUE(std::regex_match(fields[0], row)) << out;

  // The term and index survive a restart; the term grows (a new election).
  uint64_t term = st["raftTerm"].get<uint64_t>(), index = st["raftIndex"].get<uint64_t>();
  ASSERT_EQ(member_.Stop(), 0) << member_.log();
  ASSERT_TRUE(member_.Start()) << member_.log();
  j = Json({"endpoint", "status"});
  EXPECT_GT(j[0]["Status"]["raftTerm"].get<uint64_t>(), term);
  EXPECT_GT(j[0]["Status"]["raftIndex"].get<uint64_t>(), index);
  EXPECT_EQ(j[0]["Status"]["header"]["member_id"].get<uint64_t>(), id);
  EXPECT_EQ(j[0]["Status"]["header"]["revision"], 2);
}

TEST_F(EtcdctlTest, EndpointHealthAndHashKV) {
  CmdResult r = Run({"endpoint", "health"});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  EXPECT_TRUE(std::regex_search(
      r.out + r.err,
      std::regex(member_.endpoint() + " is healthy: successfully committed proposal: took = ")))
      << r.Describe();
  json j = Json({"endpoint", "health"});
  EXPECT_EQ(j[0]["endpoint"], member_.endpoint());
  EXPECT_EQ(j[0]["health"], true);

  Ok({"put", "a", "1"});
  std::string h1 = Ok({"endpoint", "hashkv"});
  EXPECT_TRUE(std::regex_match(h1, std::regex("^" + member_.endpoint() + ", \\d+\n$"))) << h1;
  EXPECT_EQ(Ok({"endpoint", "hashkv"}), h1);
  // Reads do not change the hash; writes do.
  Ok({"get", "a"});
  EXPECT_EQ(Ok({"endpoint", "hashkv"}), h1);
  Ok({"put", "a", "2"});
  std::string h2 = Ok({"endpoint", "hashkv"});
  EXPECT_NE(h2, h1);
  // The hash at an earlier revision is the earlier hash.
  EXPECT_EQ(Ok({"endpoint", "hashkv", "--rev=2"}), h1);
  j = Json({"endpoint", "hashkv"});
  EXPECT_EQ(j[0]["HashKV"]["header"]["revision"], 3);
  EXPECT_TRUE(j[0]["HashKV"]["hash"].is_number());
  // The same after a restart.
  ASSERT_EQ(member_.Stop(), 0) << member_.log();
  ASSERT_TRUE(member_.Start()) << member_.log();
  EXPECT_EQ(Ok({"endpoint", "hashkv"}), h2);
}

TEST_F(EtcdctlTest, SnapshotSave) {
  for (int i = 0; i < 200; ++i) {
    etcdserverpb::PutResponse resp;
    ASSERT_TRUE(
        member_.client().Put("key" + std::to_string(i), std::string(1000, 'x'), 0, &resp).ok());
  }
  std::string path = member_.dir() + "/snap.db";
  CmdResult r = Run({"snapshot", "save", path});
  ASSERT_EQ(r.rc, 0) << r.Describe();
  EXPECT_EQ(r.out, "Snapshot saved at " + path + "\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 200 * 1000);
  // A whole number of pages followed by the SHA-256 etcdctl checks.
  EXPECT_EQ(st.st_size % 512, 32) << st.st_size;
  // Saving twice with no writes in between gives the same bytes.
  std::string path2 = member_.dir() + "/snap2.db";
  ASSERT_EQ(Run({"snapshot", "save", path2}).rc, 0);
  EXPECT_EQ(ReadFile(path), ReadFile(path2));
}

TEST_F(EtcdctlTest, Defrag) {
  for (int i = 0; i < 50; ++i) Ok({"put", "k", std::to_string(i)});
  Ok({"compaction", std::to_string(Revision())});
  EXPECT_EQ(Ok({"defrag"}), "Finished defragmenting etcd member[" + member_.endpoint() + "]\n");
  EXPECT_EQ(Ok({"get", "k", "--print-value-only"}), "49\n");
  EXPECT_EQ(Ok({"put", "k", "after"}), "OK\n");
}

TEST_F(EtcdctlTest, MemberList) {
  uint64_t id = MemberId();
  EXPECT_EQ(Ok({"member", "list"}), HexId(id) + ", started, default, " + member_.peer_url() + ", " +
                                        member_.url() + ", false\n");
  json j = Json({"member", "list"});
  ASSERT_EQ(j["members"].size(), 1u);
  EXPECT_EQ(j["members"][0]["ID"].get<uint64_t>(), id);
  EXPECT_EQ(j["members"][0]["name"], "default");
  EXPECT_EQ(j["members"][0]["peerURLs"], json::array({member_.peer_url()}));
  EXPECT_EQ(j["members"][0]["clientURLs"], json::array({member_.url()}));
  EXPECT_FALSE(j["members"][0].contains("isLearner"));
}

TEST_F(EtcdctlTest, AlarmNoSpace) {
  // Restart with a small quota.
  ASSERT_EQ(member_.Stop(), 0) << member_.log();
  ASSERT_TRUE(member_.Start({{"quota-backend-bytes", std::to_string(4 * 1024 * 1024)}}))
      << member_.log();
  uint64_t id = MemberId();
  EXPECT_EQ(Ok({"alarm", "list"}), "");

  std::string value(100 * 1024, 'v');
  CmdResult r;
  int written = 0;
  for (; written < 200; ++written) {
    r = Run({"put", "big" + std::to_string(written), value});
    if (r.rc != 0) break;
  }
  ASSERT_NE(r.rc, 0) << "4 MiB quota never exceeded";
  EXPECT_GT(written, 5);
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: database space exceeded") << r.Describe();
  EXPECT_TRUE(Contains(r.err, "code = ResourceExhausted")) << r.Describe();

  std::string alarm = "memberID:" + std::to_string(id) + " alarm:NOSPACE \n";
  EXPECT_EQ(Ok({"alarm", "list"}), alarm);
  json j = Json({"endpoint", "status"});
  EXPECT_EQ(j[0]["Status"]["errors"],
            json::array({"memberID:" + std::to_string(id) + " alarm:NOSPACE "}));
  // Small writes fail too while the alarm is raised; reads and deletes work.
  r = Run({"put", "small", "1"});
  EXPECT_EQ(ErrorLine(r.err), "Error: etcdserver: mvcc: database space exceeded") << r.Describe();
  EXPECT_EQ(Ok({"get", "big0", "--keys-only"}), "big0\n\n");
  // The alarm persists across a restart.
  ASSERT_EQ(member_.Stop(), 0) << member_.log();
  ASSERT_TRUE(member_.Start({{"quota-backend-bytes", std::to_string(4 * 1024 * 1024)}}))
      << member_.log();
  EXPECT_EQ(Ok({"alarm", "list"}), alarm);

  // Free the space: delete, compact, defragment, disarm. The put that failed may have been
  // applied: as in etcd, a put that passed the quota check on arrival but not when applied is
  // stored and still answered with "database space exceeded".
  int64_t stored = Json({"get", "big", "--prefix", "--keys-only"})["count"].get<int64_t>();
  EXPECT_TRUE(stored == written || stored == written + 1) << stored << " vs " << written;
  EXPECT_EQ(Ok({"del", "big", "--prefix"}), std::to_string(stored) + "\n");
  Ok({"compaction", std::to_string(Revision())});
  Ok({"defrag"});
  EXPECT_EQ(Ok({"alarm", "disarm"}), alarm);
  EXPECT_EQ(Ok({"alarm", "list"}), "");
  EXPECT_EQ(Ok({"put", "small", "1"}), "OK\n");
  EXPECT_EQ(Ok({"put", "big0", value}), "OK\n");
  j = Json({"endpoint", "status"});
  EXPECT_FALSE(j[0]["Status"].contains("errors")) << j.dump();
}

// The same etcdctl commands against etcd 3.4.23 and etcd-wrapper print the same.
class DifferentialEtcdctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start()) << etcd_.log();
    ASSERT_TRUE(ours_.Start()) << ours_.log();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "--- etcd-wrapper log ---\n" << ours_.log();
  }

  // Removes what legitimately differs: identities and terms in headers, IDs in member lists.
  static void Normalize(json& j) {
    if (j.is_object()) {
      if (j.contains("header") && j["header"].is_object()) {
        j["header"].erase("cluster_id");
        j["header"].erase("member_id");
        j["header"].erase("raft_term");
      }
      for (auto& [k, v] : j.items()) Normalize(v);
    } else if (j.is_array()) {
      for (auto& v : j) Normalize(v);
    }
  }

  // Runs the command on both; expects the same exit status, stdout and error line.
  void Same(const std::vector<std::string>& args, const std::string& input = "") {
    CmdResult a = Etcdctl(etcd_, args, input);
    CmdResult b = Etcdctl(ours_, args, input);
    std::string what =
        "etcdctl " + ::testing::PrintToString(args) + " input=" + ::testing::PrintToString(input);
    EXPECT_EQ(a.rc, b.rc) << what << "\netcd: " << a.Describe() << "\nours: " << b.Describe();
    bool is_json = std::find(args.begin(), args.end(), "json") != args.end();
    if (is_json && a.rc == 0 && b.rc == 0) {
      json ja = ParseJson(a.out), jb = ParseJson(b.out);
      Normalize(ja);
      Normalize(jb);
      EXPECT_EQ(ja.dump(), jb.dump()) << what;
    } else {
      EXPECT_EQ(a.out, b.out) << what;
    }
    EXPECT_EQ(ErrorLine(a.err), ErrorLine(b.err))
        << what << "\netcd: " << a.err << "\nours: " << b.err;
  }

  Member etcd_{Member::Kind::kEtcd};
  Member ours_{Member::Kind::kEtcdWrapper};
};

// A whole authentication scenario: etcdctl's user, role and auth commands and every kind of
// permission check.
const std::vector<std::vector<std::string>>& AuthScenario() {
  static const std::vector<std::vector<std::string>> script = {
      {"user", "add", "root:rootpw"},
      {"role", "add", "root"},
      {"user", "grant-role", "root", "root"},
      {"user", "add", "alice:apw"},
      {"user", "add", "alice:again"},
      {"role", "add", "r1"},
      {"role", "grant-permission", "r1", "readwrite", "/a/", "--prefix=true"},
      {"role", "grant-permission", "r1", "read", "/b"},
      {"role", "grant-permission", "r1", "write", "/w", "/x"},
      {"user", "grant-role", "alice", "r1"},
      {"user", "grant-role", "alice", "missing"},
      {"auth", "enable"},
      {"put", "/a/x", "1"},
      {"--user=alice:apw", "put", "/a/x", "1"},
      {"--user=alice:apw", "put", "/b", "1"},
      {"--user=root:rootpw", "put", "/b", "2"},
      {"--user=alice:apw", "get", "/b"},
      {"--user=alice:apw", "get", "/c"},
      {"--user=alice:apw", "get", "/a/", "--prefix"},
      {"--user=alice:apw", "del", "/w", "/x"},
      {"--user=alice:wrong", "get", "/b"},
      {"--user=nobody:pw", "get", "/b"},
      {"--user=alice:apw", "user", "list"},
      {"--user=root:rootpw", "user", "list"},
      {"--user=root:rootpw", "role", "list"},
      {"--user=root:rootpw", "role", "get", "r1"},
      {"--user=alice:apw", "role", "get", "r1"},
      {"--user=alice:apw", "user", "get", "alice"},
      {"--user=alice:apw", "user", "get", "root"},
      {"--user=root:rootpw", "user", "get", "alice", "--detail"},
      {"--user=root:rootpw", "role", "revoke-permission", "r1", "/b"},
      {"--user=root:rootpw", "role", "revoke-permission", "r1", "/nope"},
      {"--user=alice:apw", "get", "/b"},
      {"--user=root:rootpw", "user", "passwd", "alice", "--interactive=false"},
      {"--user=alice:apw", "get", "/a/x"},
      {"--user=alice:newpw", "get", "/a/x"},
      {"--user=root:rootpw", "user", "revoke-role", "alice", "r1"},
      {"--user=root:rootpw", "user", "revoke-role", "alice", "r1"},
      {"--user=alice:newpw", "get", "/a/x"},
      {"--user=root:rootpw", "user", "delete", "root"},
      {"--user=root:rootpw", "role", "delete", "root"},
      {"--user=root:rootpw", "user", "revoke-role", "root", "root"},
      {"--user=alice:newpw", "endpoint", "hashkv"},
      {"--user=root:rootpw", "role", "delete", "r1"},
      {"--user=root:rootpw", "user", "delete", "alice"},
      {"--user=root:rootpw", "auth", "disable"},
      {"get", "/b"},
  };
  return script;
}

// It prints what it prints against etcd.
TEST_F(DifferentialEtcdctlTest, AFullAuthScenarioPrintsWhatEtcdPrints) {
  for (const auto& args : AuthScenario()) {
    Same(args, args.size() > 3 && args[2] == "passwd" ? "newpw\n" : "");
  }
}

// The same with JWT tokens, both servers holding the same key.
class JwtEtcdctlTest : public DifferentialEtcdctlTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(certs_.AddCa("jwt")) << certs_.log();
    const Settings jwt = {{"auth-token", "jwt,priv-key=" + certs_.Key("jwt") + ",pub-key=" +
                                             certs_.Crt("jwt") + ",sign-method=ES256"}};
    ASSERT_TRUE(etcd_.Start(jwt)) << etcd_.log();
    ASSERT_TRUE(ours_.Start(jwt)) << ours_.log();
  }
  TestCerts certs_;
};

TEST_F(JwtEtcdctlTest, AFullAuthScenarioWithJwtTokensPrintsWhatEtcdPrints) {
  for (const auto& args : AuthScenario()) {
    Same(args, args.size() > 3 && args[2] == "passwd" ? "newpw\n" : "");
  }
}

TEST_F(DifferentialEtcdctlTest, KvCommands) {
  Same({"put", "a", "1"});
  Same({"put", "b", "2"});
  Same({"put", "c", "3"});
  Same({"put", "a", "4", "--prev-kv"});
  Same({"put", "b/x", "5"});
  Same({"put", "b/y", "6"});
  Same({"get", "a"});
  Same({"get", "a", "--rev=2"});
  Same({"get", "a", "--rev=1"});
  Same({"get", "", "--prefix"});
  Same({"get", "b", "--prefix", "--limit=2"});
  Same({"get", "b", "--prefix", "--keys-only"});
  Same({"get", "b", "--prefix", "--print-value-only"});
  Same({"get", "a", "c"});
  Same({"get", "--from-key", "b/"});
  Same({"get", "", "--prefix", "--sort-by=VALUE", "--order=DESCEND"});
  Same({"get", "", "--prefix", "--sort-by=CREATE", "--order=ASCEND", "--limit=3"});
  Same({"get", "", "--prefix", "-w", "json"});
  Same({"get", "b", "--prefix", "--limit=1", "-w", "json"});
  Same({"get", "b", "--prefix", "--keys-only", "-w", "json"});
  Same({"get", "missing", "-w", "json"});
  Same({"get", "a", "--rev=99"});
  Same({"put", "a", "--ignore-value"});
  Same({"put", "zz", "--ignore-value"});
  Same({"put", "a", "7", "--prev-kv", "-w", "json"});
  Same({"del", "b", "--prefix", "--prev-kv"});
  Same({"del", "missing"});
  Same({"del", "a", "--prev-kv", "-w", "json"});
  Same({"txn"}, "value(\"c\") = \"3\"\n\nput c 30\nget c\n\nput c 31\n\n");
  Same({"txn"}, "value(\"c\") = \"3\"\n\nput c 40\n\nput d 41\ndel c\n\n");
  Same({"txn"}, "version(\"d\") = \"1\"\nmod(\"c\") < \"100\"\n\nget d\n\n\n");
  Same({"txn", "-w", "json"}, "create(\"d\") > \"0\"\n\nput e 1\nget d\n\n\n");
  Same({"txn", "-i"}, "\nput f 1\n\n\n");
  Same({"compaction", "3"});
  Same({"get", "a", "--rev=2"});
  Same({"get", "", "--prefix", "--rev=4"});
  Same({"compaction", "2"});
  Same({"compaction", "--physical", "8"});
  Same({"get", "", "--prefix", "-w", "json"});
  Same({"alarm", "list"});
  Same({"watch", "c", "--rev=2"});
  Same({"endpoint", "hashkv", "--rev=2"});
  Same({"lease", "revoke", "1234"});
  Same({"lease", "timetolive", "1234"});
  Same({"lease", "keep-alive", "--once", "1234"});
  Same({"put", "--lease=1234", "x", "y"});
  Same({"txn"}, "bogus(\"k\") = \"1\"\n\n\n\n");
}

TEST_F(DifferentialEtcdctlTest, WatchReplay) {
  Same({"put", "w/a", "1"});
  Same({"txn"}, "\nput w/b 2\nput w/a 3\ndel w/c\n\n\n");
  Same({"put", "w/c", "4"});
  Same({"del", "w/", "--prefix"});
  Same({"put", "x", "5"});
  Same({"put", "w/a", "6"});
  // `watch` does not end by itself: all run at once for the same time and are then killed.
  const std::vector<std::vector<std::string>> watches = {
      {"watch", "--rev=1", "--prefix", "w/"},
      {"watch", "--rev=2", "--prefix", "w/", "--prev-kv"},
      {"watch", "--rev=3", "w/a", "w/c"},
      {"watch", "--rev=1", "x"}};
  std::vector<CmdResult> etcd_out(watches.size()), our_out(watches.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < watches.size(); ++i) {
    threads.emplace_back([&, i] {
      etcd_out[i] = Etcdctl(etcd_.endpoint(), watches[i], "", std::chrono::seconds(5));
    });
    threads.emplace_back([&, i] {
      our_out[i] = Etcdctl(ours_.endpoint(), watches[i], "", std::chrono::seconds(5));
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < watches.size(); ++i) {
    EXPECT_EQ(etcd_out[i].rc, our_out[i].rc);
    EXPECT_FALSE(etcd_out[i].out.empty());
    EXPECT_EQ(etcd_out[i].out, our_out[i].out) << ::testing::PrintToString(watches[i]);
  }
}

TEST_F(DifferentialEtcdctlTest, EdgeCases) {
  Same({"put", "empty", ""});
  Same({"get", "empty", "-w", "json"});
  Same({"put", "", "v"});
  Same({"get", ""});
  Same({"put", "\xff", "high"});
  Same({"get", "--from-key", ""});
  Same({"get", "--from-key", "", "--limit=1", "-w", "json"});
  Same({"get", "a", "--rev=-1"});
  Same({"get", "--prefix", "", "--limit=-1"});
  Same({"get", "--hex", "--prefix", "e"});
  Same({"del", "a", "a"});
  Same({"del", "--from-key", "", "--prev-kv"});
  Same({"compaction", "0"});
  Same({"compaction", "-5"});
  Same({"txn"}, "\n\n\n");
  Same({"txn"}, "value(\"x\") = \"\"\n\nput x 1\n\n\n");
  Same({"txn"}, "version(\"x\") > \"0\"\n\nput x 2\nput x 3\n\n\n");
  Same({"txn", "-w", "json"}, "\nget x\ndel x\nput y 1\n\n\n");
  Same({"get", "", "--prefix", "-w", "json"});
  Same({"lease", "timetolive", "0"});
  Same({"lease", "revoke", "0"});
}

}  // namespace
}  // namespace etcdw::testing
