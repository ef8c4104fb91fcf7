#include "etcdw/mvcc/snapshot.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "etcdw/common/varint.h"
#include "etcdw/storage/meta_records.h"

namespace etcdw::mvcc {

using storage::Column;

namespace {

constexpr uint8_t kEndMarker = 0xFF;
constexpr uint64_t kAlignment = 512;

uint64_t PaddingAfter(uint64_t bytes) { return (kAlignment - bytes % kAlignment) % kAlignment; }
constexpr uint32_t kFormatVersion = 1;
// The columns a snapshot holds, in stream order.
constexpr Column kSnapshotColumns[] = {Column::kMeta, Column::kKeys, Column::kRevisions,
                                       Column::kLeases};
constexpr int kNumSnapshotColumns = 4;

std::string Header() {
  std::string h(kSnapshotMagic, 8);
  h.push_back(0);
  h.push_back(0);
  h.push_back(0);
  h.push_back(static_cast<char>(kFormatVersion));
  return h;
}

}  // namespace

SnapshotWriter::SnapshotWriter(const storage::Engine& engine)
    : engine_(engine), snap_(engine.GetSnapshot()) {}
SnapshotWriter::~SnapshotWriter() = default;

Result<uint64_t> SnapshotWriter::TotalSize() {
  uint64_t total = Header().size() + 1;
  for (Column c : kSnapshotColumns) {
    storage::ReadOptions ro;
    ro.snapshot = snap_.get();
    ro.fill_cache = false;
    auto it = engine_.NewIterator(c, ro);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (c == Column::kMeta && !storage::meta::InSnapshot(it->key())) continue;
      total += 1 + common::VarintSize(it->key().size()) + it->key().size() +
               common::VarintSize(it->value().size()) + it->value().size();
    }
    ETCDW_RETURN_IF_ERROR(it->status());
  }
  return total + PaddingAfter(total) + 32;
}

bool SnapshotWriter::NextRecord(std::string& out) {
  while (column_ < kNumSnapshotColumns) {
    if (it_ && it_->Valid()) {
      Column c = kSnapshotColumns[column_];
      std::string_view k = it_->key(), v = it_->value();
      if (c != Column::kMeta || storage::meta::InSnapshot(k)) {
        size_t start = out.size();
        out.push_back(static_cast<char>(c));
        common::AppendVarint(out, k.size());
        out.append(k);
        common::AppendVarint(out, v.size());
        out.append(v);
        sha_.Update(std::string_view(out).substr(start));
        it_->Next();
        return true;
      }
      it_->Next();
      continue;
    }
    if (it_ && !it_->status().ok()) return false;
    ++column_;
    if (column_ < kNumSnapshotColumns) {
      storage::ReadOptions ro;
      ro.snapshot = snap_.get();
      ro.fill_cache = false;
      it_ = engine_.NewIterator(kSnapshotColumns[column_], ro);
      it_->SeekToFirst();
    }
  }
  return false;
}

Result<bool> SnapshotWriter::Next(std::string& out, size_t max_bytes) {
  if (trailer_done_) return false;
  const size_t start = out.size();
  if (column_ == -1) {
    std::string h = Header();
    sha_.Update(h);
    out += h;
    column_ = 0;
    storage::ReadOptions ro;
    ro.snapshot = snap_.get();
    ro.fill_cache = false;
    it_ = engine_.NewIterator(kSnapshotColumns[0], ro);
    it_->SeekToFirst();
  }
  // At least one record per call, so that any max_bytes makes progress.
  do {
    if (NextRecord(out)) continue;
    if (it_) ETCDW_RETURN_IF_ERROR(it_->status());
    std::string end(1, static_cast<char>(kEndMarker));
    end.append(PaddingAfter(written_ + (out.size() - start) + 1), '\0');
    sha_.Update(end);
    out += end;
    auto digest = sha_.Final();
    out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    trailer_done_ = true;
    break;
  } while (out.size() - start < max_bytes);
  written_ += out.size() - start;
  return true;
}

namespace {

// Reads the stream while hashing everything but the final 32 bytes.
class HashingReader {
 public:
  explicit HashingReader(std::istream& in) : in_(in) {}
  bool Read(char* dst, size_t n) {
    if (!in_.read(dst, static_cast<std::streamsize>(n))) return false;
    sha_.Update(std::string_view(dst, n));
    consumed_ += n;
    return true;
  }
  uint64_t consumed() const { return consumed_; }
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      char c;
      if (!Read(&c, 1)) return false;
      *v |= static_cast<uint64_t>(static_cast<uint8_t>(c) & 0x7f) << shift;
      if (!(static_cast<uint8_t>(c) & 0x80)) return true;
    }
    return false;
  }
  // Reads `n` bytes into `out`, growing it as they arrive, 1 MiB at a time: a damaged length
  // costs memory only for the bytes that are there (not up to 1 GiB before a short read).
  bool ReadString(std::string& out, uint64_t n) {
    constexpr uint64_t kPiece = uint64_t{1} << 20;
    out.clear();
    while (out.size() < n) {
      const size_t at = out.size();
      const auto piece = static_cast<size_t>(std::min<uint64_t>(n - at, kPiece));
      out.resize(at + piece);
      if (!Read(out.data() + at, piece)) return false;
    }
    return true;
  }
  bool ReadRaw(char* dst, size_t n) {
    return static_cast<bool>(in_.read(dst, static_cast<std::streamsize>(n)));
  }
  std::array<uint8_t, 32> Digest() { return sha_.Final(); }

 private:
  std::istream& in_;
  common::Sha256 sha_;
  uint64_t consumed_ = 0;
};

}  // namespace

Status RestoreSnapshot(std::istream& in, storage::Engine& engine) {
  HashingReader r(in);
  char header[12];
  if (!r.Read(header, sizeof header) || std::memcmp(header, kSnapshotMagic, 8) != 0) {
    return DataLoss("snapshot: not an etcd-wrapper snapshot (bad magic)");
  }
  uint32_t version = (uint32_t(uint8_t(header[8])) << 24) | (uint32_t(uint8_t(header[9])) << 16) |
                     (uint32_t(uint8_t(header[10])) << 8) | uint32_t(uint8_t(header[11]));
  if (version != kFormatVersion) {
    return DataLoss("snapshot: unsupported format version " + std::to_string(version));
  }
  storage::Batch batch(engine);
  std::string key, value;
  uint64_t records = 0;
  while (true) {
    char col;
    if (!r.Read(&col, 1))
      return DataLoss("snapshot: truncated after " + std::to_string(records) + " records");
    if (static_cast<uint8_t>(col) == kEndMarker) break;
    bool known = false;
    for (Column c : kSnapshotColumns) known |= static_cast<int>(c) == col;
    if (!known) return DataLoss("snapshot: unknown column " + std::to_string(int(col)));
    uint64_t klen, vlen;
    if (!r.ReadVarint(&klen) || klen > (1u << 30)) return DataLoss("snapshot: bad key length");
    if (!r.ReadString(key, klen)) return DataLoss("snapshot: truncated key");
    if (!r.ReadVarint(&vlen) || vlen > (1u << 30)) return DataLoss("snapshot: bad value length");
    if (!r.ReadString(value, vlen)) return DataLoss("snapshot: truncated value");
    if (static_cast<Column>(col) == Column::kMeta && !storage::meta::InSnapshot(key)) {
      return DataLoss("snapshot: meta record \"" + storage::meta::Printable(key) +
                      "\" is not replicated state this version knows");
    }
    batch.Put(static_cast<Column>(col), key, value);
    ++records;
    if (batch.DataSize() > (size_t{4} << 20)) {
      ETCDW_RETURN_IF_ERROR(engine.Write(batch, false));
      batch.Clear();
    }
  }
  for (uint64_t pad = PaddingAfter(r.consumed()); pad > 0; --pad) {
    char z;
    if (!r.Read(&z, 1) || z != 0) return DataLoss("snapshot: bad padding before the SHA-256");
  }
  auto digest = r.Digest();
  char trailer[32];
  if (!r.ReadRaw(trailer, 32)) return DataLoss("snapshot: missing SHA-256 trailer");
  if (std::memcmp(trailer, digest.data(), 32) != 0) {
    return DataLoss("snapshot: SHA-256 mismatch, the snapshot is corrupt");
  }
  char extra;
  if (in.read(&extra, 1)) return DataLoss("snapshot: trailing bytes after the SHA-256");
  ETCDW_RETURN_IF_ERROR(engine.Write(batch, /*sync=*/true));
  return Status::Ok();
}

Status VerifySnapshotFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("snapshot file \"" + path + "\" cannot be read");
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 32 + 13) return DataLoss("snapshot file \"" + path + "\" is too short");
  in.seekg(0);
  common::Sha256 sha;
  std::vector<char> buf(1 << 16);
  std::streamoff left = size - 32;
  while (left > 0) {
    std::streamsize n = static_cast<std::streamsize>(std::min<std::streamoff>(left, buf.size()));
    if (!in.read(buf.data(), n)) return DataLoss("snapshot file \"" + path + "\" read failed");
    sha.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    left -= n;
  }
  char trailer[32];
  in.read(trailer, 32);
  auto digest = sha.Final();
  if (std::memcmp(trailer, digest.data(), 32) != 0) {
    return DataLoss("snapshot file \"" + path + "\": SHA-256 mismatch");
  }
  return Status::Ok();
}

}  // namespace etcdw::mvcc

namespace etcdw::mvcc {

Status ClearState(storage::Engine& engine) {
  for (storage::Column c : kSnapshotColumns) {
    auto it = engine.NewIterator(c);
    storage::Batch batch(engine);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (c == storage::Column::kMeta && storage::meta::KeptOverSnapshot(it->key())) continue;
      batch.Delete(c, it->key());
      if (batch.Count() >= 10000) {
        ETCDW_RETURN_IF_ERROR(engine.Write(batch, false));
        batch.Clear();
      }
    }
    ETCDW_RETURN_IF_ERROR(it->status());
    if (!batch.Empty()) ETCDW_RETURN_IF_ERROR(engine.Write(batch, false));
  }
  return Status::Ok();
}

}  // namespace etcdw::mvcc
