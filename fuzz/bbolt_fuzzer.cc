// Opens a file made from the input with the bbolt reader (BoltDb::Open, as restoring etcd's
// snapshot.db or taking over a member's db reads it) and walks everything it holds. Opening must
// load the meta page or fail with a message, never crash. Beyond that, a database that opens
// must read consistently:
// - its meta is sane: a valid page size, and the pages in use fit in the file;
// - a walk of every bucket (nested ones too, a few levels deep) lists each bucket's keys in
//   strictly increasing order, or fails with a message; walking again gives the same entries
//   and the same error;
// - every key listed reads back (Get) as the value listed, and every bucket listed exists
//   (HasBucket) or fails as its walk did (a damaged bucket header); a lookup of what was not
//   listed finds nothing or fails with a message. (At most 24 lookups, spread over the keys.)
// Input: byte 0 bit 0 set: the rest is the file as is. Otherwise the rest is a program that
// writes a valid database with BoltWriter and then damages it (so that inputs get past the meta
// page's checksum and reach the trees); see Build.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/bbolt/db.h"
#include "etcdw/bbolt/writer.h"
#include "etcdw/common/status.h"
#include "input_reader.h"
#include "scratch_dir.h"

namespace {

using etcdw::Code;
using etcdw::Status;
using etcdw::bbolt::BoltDb;
using etcdw::bbolt::BoltWriter;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "bbolt_fuzzer: %s\n", what);
  std::abort();
}

// Bounds on the work one input asks for.
constexpr size_t kMostFileBytes = size_t{128} << 10;
constexpr size_t kMostLookups = 24;  // spread over the entries listed
constexpr size_t kMostBuckets = 64;
constexpr size_t kMostDepth = 6;

void FailWith(const char* what, const Status& st) {
  std::fwrite(st.message().data(), 1, st.message().size(), stderr);
  std::fputc('\n', stderr);
  Fail(what);
}

// Every error the reader returns must say what is wrong.
void CheckError(const Status& st) {
  if (st.ok()) Fail("an error that is Ok");
  if (st.message().empty()) Fail("an error without a message");
}

// The smallest text after `last` that has `want` in it: `want` itself when it sorts after it.
std::string After(const std::string& last, std::string_view want) {
  if (last < want) return std::string(want);
  return last + '\0' + std::string(want);
}

// Reads the input as a program. Building steps, a byte `op` each, op & 3:
//   0  begin a bucket named by the next 1 + (op >> 2) % 8 bytes (made to sort after the last)
//   1  put a key of the next 1 + (op >> 2) % 8 bytes (made to sort after the last) with a value
//      of the next byte's count of bytes << 2 * (op >> 5 & 3) (up to 16 KiB: overflow pages),
//      filled with a pattern of the key
//   2  put the next byte's count times 4 keys with short values (enough for branch pages)
//   3  finish the database; the rest damages it
// Damage steps, a byte `op` each, op & 3, where `page` is the next byte modulo the file's pages
// and `at` the next two bytes (little-endian) modulo the page size:
//   0  flip bit op >> 5 of the byte at page, at
//   1  write (op >> 2) % 8 + 1 bytes of the input at page, at (counts, positions, page ids)
//   2  cut the file to its first (next byte) * 64 bytes, if shorter
//   3  recompute both meta pages' checksums (so that damage to the meta reaches the reader)
// Returns the file; an empty one when the writer refused (a harness bug: it never should).
std::string Build(etcdw::fuzz::InputReader& in, const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  auto created = BoltWriter::Create(path);
  if (!created.ok()) FailWith("cannot create a database", created.status());
  BoltWriter& w = **created;
  std::string bucket, key;
  size_t bytes = 0;
  bool open = false;
  const auto begin = [&](std::string_view name) {
    bucket = After(bucket, name);
    const Status st = w.BeginBucket(bucket);
    if (!st.ok()) FailWith("the writer refused a bucket", st);
    key.clear();
    open = true;
  };
  const auto put = [&](std::string_view k, std::string_view value) {
    if (!open) begin("b");
    key = key.empty() ? std::string(k) : After(key, k);
    const Status st = w.Put(key, value);
    if (!st.ok()) FailWith("the writer refused an entry", st);
    bytes += key.size() + value.size() + 16;
  };
  while (!in.empty() && bytes < kMostFileBytes / 2) {
    const uint8_t op = in.Byte();
    if ((op & 3) == 3) break;
    std::string_view name = in.Take(1 + (op >> 2) % 8);
    if (name.empty()) name = "z";
    if ((op & 3) == 0) {
      begin(name);
    } else if ((op & 3) == 1) {
      const size_t n = size_t{in.Byte()} << 2 * (op >> 5 & 3);
      std::string value(n, '\0');
      for (size_t i = 0; i < n; ++i) value[i] = name[i % name.size()];
      put(name, value);
    } else {
      const size_t n = size_t{in.Byte()} * 4;
      for (size_t i = 0; i < n && bytes < kMostFileBytes / 2; ++i) {
        char k[16];
        std::snprintf(k, sizeof k, "%06zu", i);
        put(std::string(name) + k, std::string_view(k, 3));
      }
    }
  }
  auto finished = w.Finish();
  if (!finished.ok()) FailWith("the writer failed", finished.status());

  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::string file(static_cast<size_t>(f.tellg()), '\0');
  f.seekg(0);
  f.read(file.data(), static_cast<std::streamsize>(file.size()));
  if (!f) Fail("cannot read the database written");
  const size_t page = etcdw::bbolt::kWriterPageSize;
  if (file.size() != finished->pages * page) Fail("the writer's file is not its pages");
  while (!in.empty() && !file.empty()) {
    const uint8_t op = in.Byte();
    if ((op & 3) == 2) {
      file.resize(std::min<size_t>(file.size(), size_t{in.Byte()} * 64));
      continue;
    }
    if ((op & 3) == 3) {
      for (size_t p = 0; p < 2 && (p + 1) * page <= file.size(); ++p) {
        char* meta = file.data() + p * page + 16;
        const uint64_t sum = etcdw::bbolt::Fnv1a64(std::string_view(meta, 56));
        std::memcpy(meta + 56, &sum, sizeof sum);
      }
      continue;
    }
    const size_t pages = (file.size() + page - 1) / page;
    const size_t p = in.Byte() % pages;
    const size_t lo = in.Byte();
    const size_t at = std::min(file.size() - 1, p * page + (lo | size_t{in.Byte()} << 8) % page);
    if ((op & 3) == 0) {
      file[at] = static_cast<char>(file[at] ^ (1 << (op >> 5)));
    } else {
      const std::string_view bytes_in = in.Take((op >> 2) % 8 + 1);
      file.replace(at, std::min(bytes_in.size(), file.size() - at), bytes_in);
      file.resize(std::max(file.size(), at + bytes_in.size()));
    }
  }
  return file;
}

// What a walk of the database found: every bucket's entries and the error that stopped it.
struct Entry {
  std::vector<std::string> path;
  std::string key, value;
  bool is_bucket = false;
  bool operator==(const Entry&) const = default;
};
struct Listing {
  std::vector<Entry> entries;
  std::map<std::vector<std::string>, std::string> errors;  // a bucket's path: its walk's error
  std::set<std::vector<std::string>> walked;               // the buckets walked
  bool operator==(const Listing&) const = default;
};

void Walk(const BoltDb& db, const std::vector<std::string>& path, Listing& out, size_t& buckets) {
  out.walked.insert(path);
  std::vector<std::string> nested;
  std::optional<std::string> last;
  const Status st =
      db.ForEach(path, [&](std::string_view key, std::string_view value, bool is_bucket) {
        if (last && !(*last < key)) Fail("a bucket's keys are not in increasing order");
        last = std::string(key);
        if (is_bucket && !value.empty()) Fail("a nested bucket with a value");
        out.entries.push_back({path, std::string(key), std::string(value), is_bucket});
        if (is_bucket) nested.emplace_back(key);
        return Status::Ok();
      });
  if (!st.ok()) {
    CheckError(st);
    if (st.code() != Code::kDataLoss) FailWith("a walk failed other than DataLoss", st);
    out.errors[path] = st.message();
  }
  if (path.size() >= kMostDepth) return;
  for (const std::string& name : nested) {
    if (++buckets > kMostBuckets) return;
    std::vector<std::string> inner = path;
    inner.push_back(name);
    Walk(db, inner, out, buckets);
  }
}

Listing WalkAll(const BoltDb& db) {
  Listing l;
  size_t buckets = 0;
  Walk(db, {}, l, buckets);
  return l;
}

void CheckLookups(const BoltDb& db, const Listing& l) {
  const auto out_of_reach = [&l](const std::vector<std::string>& path) {
    return l.walked.count(path) == 0;
  };
  const size_t step = (l.entries.size() + kMostLookups - 1) / kMostLookups;
  for (size_t i = 0; i < l.entries.size(); i += std::max<size_t>(step, 1)) {
    const Entry& e = l.entries[i];
    if (e.is_bucket) {
      std::vector<std::string> inner = e.path;
      inner.push_back(e.key);
      // A bucket whose header is damaged is listed (its leaf element says bucket); it does not
      // resolve, and its walk failed the same way.
      auto has = db.HasBucket(inner);
      if (!has.ok()) {
        CheckError(has.status());
        if (out_of_reach(inner)) continue;
        auto err = l.errors.find(inner);
        if (err == l.errors.end() || err->second != has.status().message()) {
          FailWith("a bucket listed does not resolve, yet its walk did not fail so", has.status());
        }
        continue;
      }
      if (!*has) Fail("a bucket listed is not there");
      auto got = db.Get(e.path, e.key);
      if (!got.ok()) FailWith("a lookup of a bucket listed failed", got.status());
      if (*got) Fail("a bucket listed reads as a value");
      continue;
    }
    auto got = db.Get(e.path, e.key);
    if (!got.ok()) FailWith("a key listed does not read back", got.status());
    if (!*got) Fail("a key listed is not found");
    if (**got != e.value) Fail("a key listed reads back another value");
  }
  // Names that were not listed: nothing, or an error with a message.
  for (const std::vector<std::string>& path :
       {std::vector<std::string>{}, std::vector<std::string>{"key"}}) {
    auto got = db.Get(path, "\xff\xff-not-listed");
    if (got.ok() && *got) Fail("a key that was not listed reads back");
    if (!got.ok()) CheckError(got.status());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string path = etcdw::fuzz::ScratchDir("bbolt_fuzzer") + "/db";
  etcdw::fuzz::InputReader in(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  std::string file;
  if (data[0] & 1) {
    file = std::string(in.Take(size - 1));
  } else {
    file = Build(in, path);
  }
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(file.data(), static_cast<std::streamsize>(file.size()));
    if (!f) Fail("cannot write the database file");
  }
  // Byte 0 bit 1: open the file's first bytes only (an etcd snapshot's trailer follows them).
  const int64_t length =
      (data[0] & 2) ? static_cast<int64_t>(file.size() - std::min<size_t>(file.size(), 32)) : -1;
  auto opened = BoltDb::Open(path, length);
  if (!opened.ok()) {
    CheckError(opened.status());
    return 0;
  }
  const BoltDb& db = **opened;
  const etcdw::bbolt::Meta& meta = db.meta();
  const uint32_t ps = meta.page_size;
  if (ps < 512 || ps > (1u << 20) || (ps & (ps - 1)) != 0) Fail("a bad page size opened");
  const uint64_t bytes = length >= 0 ? static_cast<uint64_t>(length) : file.size();
  if (meta.high_water < 3 || meta.high_water > bytes / ps) Fail("the pages in use do not fit");
  if (meta.from_page != 0 && meta.from_page != 1) Fail("a meta from neither meta page");

  const Listing first = WalkAll(db);
  const Listing second = WalkAll(db);
  if (!(first == second)) Fail("a second walk lists other entries");
  CheckLookups(db, first);
  return 0;
}
