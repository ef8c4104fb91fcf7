// Feeds the store's saved records that are decoded on open arbitrary bytes: the key index's
// copy saved across a clean stop (KeyIndex::LoadSaved reading its head and chunk records from
// the engine's Meta column; the engine is RocksDB in memory, opened once), and the keys of the
// revision log and of the versioned Keys column (DecodeRevisionKey, UserKeyOf, VersionOf, the
// column's comparator). Beyond not crashing, it checks that:
// - loading gives kNone, kOtherRevision, kLoaded or DataLoss with a message, and leaves the
//   index as it was unless it loaded; a loaded index has the head's number of keys and, saved
//   again with StageSave, loads again to the same keys;
// - revision and versioned keys decode to what encodes them, byte order is revision order, and
//   the comparator is a total order (antisymmetric, transitive) on keys of any length.
// Input: byte 0 the store's revision; byte 1 the head's number of keys, byte 2 its number of
// chunks, byte 3 its revision less the store's (bit 7 set: the head is the next 25 bytes as
// is); then chunks, each a byte of length and its bytes. The keys of the last checks are cut
// from the whole input again.
#include <rocksdb/comparator.h>
#include <rocksdb/slice.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "etcdw/mvcc/key_index.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/engine.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/versioned_key.h"
#include "in_memory_engine.h"

namespace {

namespace storage = etcdw::storage;
namespace meta = storage::meta;
using etcdw::mvcc::KeyIndex;
using etcdw::mvcc::Revision;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "saved_records_fuzzer: %s\n", what);
  std::abort();
}

// Replaces every saved record of the key index in `engine` by those staged in `batch`.
void Replace(storage::Engine& engine, storage::Batch& batch) {
  storage::Batch clear(engine);
  if (!KeyIndex::StageDeleteSaved(engine, clear).ok()) Fail("listing the saved records failed");
  if (!engine.Write(clear, false).ok() || !engine.Write(batch, false).ok()) Fail("a write failed");
}

std::string ChunkKey(uint64_t n) {
  return meta::KeyIn(meta::kKeyIndexChunks, storage::EncodeFixed64BE(n));
}

void CheckSavedIndex(std::string_view in, int64_t rev) {
  if (in.size() < 4) return;
  const auto head_keys = static_cast<uint8_t>(in[1]);
  const auto head_chunks = static_cast<uint8_t>(in[2]);
  const auto head_rev_delta = static_cast<uint8_t>(in[3]);
  in.remove_prefix(4);
  std::string head;
  if (head_rev_delta & 0x80) {
    head = std::string(in.substr(0, 25));
    in.remove_prefix(head.size());
  } else {
    head.push_back(1);
    storage::PutFixed64BE(head, static_cast<uint64_t>(rev + (head_rev_delta & 1)));
    storage::PutFixed64BE(head, head_keys);
    storage::PutFixed64BE(head, head_chunks);
  }
  storage::Engine* const engine = &etcdw::fuzz::InMemoryEngine();
  storage::Batch batch(*engine);
  batch.Put(storage::Column::kMeta, meta::kKeyIndexHead.key, head);
  for (uint64_t n = 0; !in.empty(); ++n) {
    const size_t len = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    batch.Put(storage::Column::kMeta, ChunkKey(n), in.substr(0, len));
    in.remove_prefix(std::min(len, in.size()));
  }
  Replace(*engine, batch);

  KeyIndex index;
  KeyIndex empty;
  auto loaded = index.LoadSaved(*engine, rev);
  if (!loaded.ok()) {
    if (loaded.status().code() != etcdw::Code::kDataLoss) Fail("an error that is not DataLoss");
    if (loaded.status().message().empty()) Fail("an error without a message");
  }
  if (!loaded.ok() || *loaded != KeyIndex::Saved::kLoaded) {
    if (index.size() != 0 || !index.SameKeysAs(empty)) Fail("a failed load changed the index");
    return;
  }
  if (head_rev_delta & 0x80) return;  // the head's counts are not known here
  if (index.size() != head_keys) Fail("the index loaded does not have the head's keys");

  // Saved again, it loads again to the same keys.
  storage::Batch again(*engine);
  index.StageSave(again);
  Replace(*engine, again);
  KeyIndex reloaded;
  auto second = reloaded.LoadSaved(*engine, rev);
  if (!second.ok() || *second != KeyIndex::Saved::kLoaded) Fail("a saved index does not load");
  if (!reloaded.SameKeysAs(index)) Fail("a saved index loads to other keys");
}

int Sign(int v) { return (v > 0) - (v < 0); }

void CheckKeys(std::string_view in) {
  if (in.size() >= 16) {
    const Revision r = etcdw::mvcc::DecodeRevisionKey(in.substr(0, 16));
    if (etcdw::mvcc::EncodeRevisionKey(r) != in.substr(0, 16)) Fail("a revision key round trip");
  }
  if (in.size() >= 32 && in[0] >= 0 && in[16] >= 0) {  // non-negative main revisions
    const Revision a = etcdw::mvcc::DecodeRevisionKey(in.substr(0, 16));
    const Revision b = etcdw::mvcc::DecodeRevisionKey(in.substr(16, 16));
    if (a.sub >= 0 && b.sub >= 0 && (a < b) != (in.substr(0, 16) < in.substr(16, 16))) {
      Fail("byte order is not revision order");
    }
  }

  // Versioned keys: the user key and version come back.
  const std::string_view user = in.substr(0, std::min<size_t>(in.size(), 24));
  const uint64_t version = in.size() >= 32 ? storage::DecodeFixed64BE(in.data() + 24) : in.size();
  const std::string vkey = storage::MakeVersionedKey(user, version);
  if (storage::UserKeyOf(vkey) != user || storage::VersionOf(vkey) != version) {
    Fail("a versioned key round trip");
  }

  // The comparator on three keys cut from the input, of 0 to 16 bytes each (around the 8 bytes
  // of the version suffix).
  rocksdb::Slice keys[3];
  std::string_view rest = in;
  for (rocksdb::Slice& key : keys) {
    const size_t len = rest.empty() ? 0 : static_cast<uint8_t>(rest.front()) % 17;
    const std::string_view piece = rest.substr(std::min<size_t>(rest.size(), 1), len);
    key = rocksdb::Slice(piece.data(), piece.size());
    rest.remove_prefix(std::min(rest.size(), 1 + piece.size()));
  }
  const rocksdb::Comparator* cmp = storage::VersionedKeyComparator();
  for (const auto& a : keys) {
    if (cmp->Compare(a, a) != 0) Fail("a key is not equal to itself");
    for (const auto& b : keys) {
      if (Sign(cmp->Compare(a, b)) != -Sign(cmp->Compare(b, a)))
        Fail("the order is not antisymmetric");
      for (const auto& c : keys) {
        if (cmp->Compare(a, b) <= 0 && cmp->Compare(b, c) <= 0 && cmp->Compare(a, c) > 0) {
          Fail("the order is not transitive");
        }
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  CheckSavedIndex(in, 1 + data[0]);
  CheckKeys(in);
  return 0;
}
