#include "etcd_wal.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "etcdw/common/hash.h"
#include "etcdw/etcd_wal.pb.h"

namespace etcdw::data_dir::internal {

namespace {

constexpr int64_t kMetadataType = 1;
constexpr int64_t kEntryType = 2;
constexpr int64_t kStateType = 3;
constexpr int64_t kCrcType = 4;
constexpr int64_t kSnapshotType = 5;
constexpr size_t kFrameBytes = 8;
constexpr size_t kSectorBytes = 512;  // what a torn write leaves whole or not at all

// Parses "<hex16>-<hex16><suffix>" into its two numbers.
bool ParseHexPairName(const std::string& name, const std::string& suffix, uint64_t* a,
                      uint64_t* b) {
  if (name.size() != 33 + suffix.size() || name[16] != '-' ||
      name.compare(33, std::string::npos, suffix) != 0) {
    return false;
  }
  auto hex = [](std::string_view s, uint64_t* out) {
    uint64_t v = 0;
    for (char c : s) {
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (d < 0) return false;
      v = v << 4 | static_cast<uint64_t>(d);
    }
    *out = v;
    return true;
  };
  return hex(std::string_view(name).substr(0, 16), a) &&
         hex(std::string_view(name).substr(17, 16), b);
}

// The names in `dir` of the form "<hex16>-<hex16><suffix>", with their numbers.
struct NamedFile {
  uint64_t a = 0;
  uint64_t b = 0;
  std::string name;
};
Result<std::vector<NamedFile>> ListHexPairFiles(const std::string& dir, const std::string& suffix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return Status(errno == ENOENT ? Code::kNotFound : Code::kUnavailable,
                  "\"" + dir + "\": " + std::strerror(errno));
  }
  std::vector<NamedFile> out;
  while (dirent* e = ::readdir(d)) {
    NamedFile f;
    f.name = e->d_name;
    if (ParseHexPairName(f.name, suffix, &f.a, &f.b)) out.push_back(std::move(f));
  }
  ::closedir(d);
  return out;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("\"" + path + "\" cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Unavailable("\"" + path + "\": read failed");
  return std::move(ss).str();
}

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

bool AllZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

// Whether the bytes [begin, end) of a file hold a whole sector-aligned chunk of zeros: the
// sign of a record whose write a crash cut short (etcd's torn-entry test).
bool HasZeroSector(std::string_view file, size_t begin, size_t end) {
  end = std::min(end, file.size());
  size_t chunk_start = begin;
  while (chunk_start < end) {
    size_t chunk_end = std::min(end, (chunk_start / kSectorBytes + 1) * kSectorBytes);
    if (AllZero(file.substr(chunk_start, chunk_end - chunk_start))) return true;
    chunk_start = chunk_end;
  }
  return false;
}

class WalReader {
 public:
  WalReader(EtcdWal& wal, uint64_t keep_data_after)
      : wal_(wal), keep_data_after_(keep_data_after) {}

  // Reads one file's records; `last`: the last file, where a torn tail is accepted.
  Status ReadFile(const std::string& path, bool last) {
    ETCDW_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
    size_t off = 0;
    while (off + kFrameBytes <= bytes.size()) {
      const uint64_t frame = LoadLe64(bytes.data() + off);
      if (frame == 0) return Status::Ok();  // the preallocated rest of the file
      const uint64_t length = frame & ~(uint64_t{0xff} << 56);
      uint64_t pad = 0;
      if ((frame >> 63) != 0) pad = (frame >> 56) & 0x7;
      const size_t body = off + kFrameBytes;
      if (length + pad > bytes.size() - body) {
        if (last) return Torn(off);
        return Bad(path, off, "the record is cut short by the end of the file");
      }
      const std::string_view data(bytes.data() + body, static_cast<size_t>(length));
      Status st = ReadRecord(data);
      if (!st.ok()) {
        // A write cut short leaves zeros where sectors were not written; the same damage with
        // valid records after it is not a crash's.
        const size_t end = body + static_cast<size_t>(length + pad);
        if (last && HasZeroSector(bytes, body, end)) return Torn(off);
        return Bad(path, off, st.message());
      }
      off = body + static_cast<size_t>(length + pad);
    }
    if (off < bytes.size() && !AllZero(std::string_view(bytes).substr(off))) {
      if (last) return Torn(off);
      return Bad(path, off, "the file ends inside a record's length");
    }
    return Status::Ok();
  }

  Status Finish() {
    if (!have_metadata_) return DataLoss("etcd WAL: no metadata record");
    return Status::Ok();
  }

 private:
  Status Torn(size_t off) {
    wal_.torn_tail_offset = static_cast<int64_t>(off);
    return Status::Ok();
  }
  static Status Bad(const std::string& path, size_t off, const std::string& what) {
    return DataLoss("etcd WAL file \"" + path + "\", offset " + std::to_string(off) + ": " + what);
  }

  Status ReadRecord(std::string_view bytes) {
    etcdwal::Record rec;
    if (!rec.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return DataLoss("not a walpb.Record");
    }
    if (rec.type() == kCrcType) {
      // The chain's value at the end of the previous file (0 at the first file: nothing to
      // compare against).
      if (crc_ != 0 && rec.crc() != crc_) return DataLoss("the CRC chain between files breaks");
      crc_ = rec.crc();
      return Status::Ok();
    }
    crc_ = common::Crc32c(crc_, rec.data());
    if (rec.crc() != crc_) return DataLoss("CRC mismatch");
    switch (rec.type()) {
      case kMetadataType:
        return Metadata(rec.data());
      case kEntryType:
        return Entry(rec.data());
      case kStateType: {
        etcdwal::HardState hs;
        if (!hs.ParseFromString(rec.data())) return DataLoss("not a raftpb.HardState");
        // etcd writes an empty hard state only when it has none; it never replaces one.
        if (hs.term() != 0 || hs.vote() != 0 || hs.commit() != 0) {
          wal_.hard_state = {hs.term(), hs.vote(), hs.commit()};
        }
        return Status::Ok();
      }
      case kSnapshotType: {
        etcdwal::WalSnapshot s;
        if (!s.ParseFromString(rec.data())) return DataLoss("not a walpb.Snapshot");
        wal_.snapshots.push_back({s.index(), s.term()});
        return Status::Ok();
      }
      default:
        return DataLoss("unknown record type " + std::to_string(rec.type()));
    }
  }

  Status Metadata(const std::string& data) {
    if (have_metadata_) {
      if (data != metadata_) return DataLoss("metadata differs from the earlier metadata record");
      return Status::Ok();
    }
    etcdwal::Metadata m;
    if (!m.ParseFromString(data)) return DataLoss("not an etcdserverpb.Metadata");
    if (m.node_id() == 0 || m.cluster_id() == 0) {
      return DataLoss("metadata without a member ID or cluster ID");
    }
    have_metadata_ = true;
    metadata_ = data;
    wal_.member_id = m.node_id();
    wal_.cluster_id = m.cluster_id();
    return Status::Ok();
  }

  Status Entry(const std::string& data) {
    etcdwal::Entry pe;
    if (!pe.ParseFromString(data)) return DataLoss("not a raftpb.Entry");
    if (pe.index() == 0) return DataLoss("an entry with index 0");
    std::vector<EtcdEntry>& ents = wal_.entries;
    if (!ents.empty()) {
      if (pe.index() > ents.back().index + 1) {
        return DataLoss("entry " + std::to_string(pe.index()) + " follows entry " +
                        std::to_string(ents.back().index));
      }
      // A rewritten index replaces the tail from it on.
      while (!ents.empty() && ents.back().index >= pe.index()) ents.pop_back();
    }
    ents.push_back({pe.index(), pe.term(), pe.type(),
                    pe.index() > keep_data_after_ ? pe.data() : std::string()});
    return Status::Ok();
  }

  EtcdWal& wal_;
  const uint64_t keep_data_after_;
  uint32_t crc_ = 0;
  bool have_metadata_ = false;
  std::string metadata_;
};

}  // namespace

std::optional<uint64_t> EtcdWal::TermOf(uint64_t index) const {
  if (index == 0) return 0;
  if (!entries.empty() && index >= entries.front().index && index <= entries.back().index) {
    return entries[index - entries.front().index].term;
  }
  for (auto it = snapshots.rbegin(); it != snapshots.rend(); ++it) {
    if (it->index == index) return it->term;
  }
  return std::nullopt;
}

Result<EtcdWal> ReadEtcdWal(const std::string& wal_dir, uint64_t keep_data_after) {
  ETCDW_ASSIGN_OR_RETURN(std::vector<NamedFile> files, ListHexPairFiles(wal_dir, ".wal"));
  if (files.empty()) return NotFound("\"" + wal_dir + "\" holds no .wal file");
  std::sort(files.begin(), files.end(),
            [](const NamedFile& x, const NamedFile& y) { return x.a < y.a; });
  for (size_t i = 1; i < files.size(); ++i) {
    if (files[i].a != files[i - 1].a + 1) {
      return DataLoss("etcd WAL: \"" + files[i].name + "\" does not follow \"" + files[i - 1].name +
                      "\" (a file is missing)");
    }
  }
  EtcdWal wal;
  WalReader reader(wal, keep_data_after);
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = wal_dir + "/" + files[i].name;
    wal.files.push_back(path);
    ETCDW_RETURN_IF_ERROR(reader.ReadFile(path, i + 1 == files.size()));
    if (wal.torn_tail_offset >= 0 && i + 1 != files.size()) {
      return DataLoss("etcd WAL: a torn record in \"" + path + "\" before the last file");
    }
  }
  ETCDW_RETURN_IF_ERROR(reader.Finish());
  return wal;
}

Result<EtcdSnapMeta> ReadEtcdSnapFile(const std::string& path) {
  auto bad = [&](const std::string& what) {
    return DataLoss("etcd snapshot file \"" + path + "\": " + what);
  };
  ETCDW_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  if (bytes.empty()) return bad("empty");
  etcdwal::SnapFile file;
  if (!file.ParseFromString(bytes)) return bad("not a snappb.Snapshot");
  if (common::Crc32c(0, file.data()) != file.crc()) return bad("CRC mismatch");
  etcdwal::RaftSnapshot snap;
  if (!snap.ParseFromString(file.data())) return bad("not a raftpb.Snapshot");
  EtcdSnapMeta m;
  m.path = path;
  m.position = {snap.metadata().index(), snap.metadata().term()};
  m.voters.assign(snap.metadata().conf_state().nodes().begin(),
                  snap.metadata().conf_state().nodes().end());
  m.learners.assign(snap.metadata().conf_state().learners().begin(),
                    snap.metadata().conf_state().learners().end());
  const std::string name = path.substr(path.find_last_of('/') + 1);
  uint64_t term = 0, index = 0;
  if (ParseHexPairName(name, ".snap", &term, &index) &&
      (term != m.position.term || index != m.position.index)) {
    return bad("its metadata (index " + std::to_string(m.position.index) + ", term " +
               std::to_string(m.position.term) + ") disagrees with its name");
  }
  return m;
}

Result<std::optional<EtcdSnapMeta>> ReadNewestEtcdSnap(const std::string& snap_dir) {
  ETCDW_ASSIGN_OR_RETURN(std::vector<NamedFile> files, ListHexPairFiles(snap_dir, ".snap"));
  if (files.empty()) return std::optional<EtcdSnapMeta>();
  // Newest first: by index, then term (etcd sorts the names, which sort by term first; a
  // member's terms and indexes grow together).
  std::sort(files.begin(), files.end(), [](const NamedFile& x, const NamedFile& y) {
    return x.b != y.b ? x.b > y.b : x.a > y.a;
  });
  Status first_error;
  for (const NamedFile& f : files) {
    auto m = ReadEtcdSnapFile(snap_dir + "/" + f.name);
    if (m.ok()) return std::optional<EtcdSnapMeta>(std::move(*m));
    if (first_error.ok()) first_error = m.status();
  }
  return first_error.WithContext("no .snap file of \"" + snap_dir + "\" reads");
}

}  // namespace etcdw::data_dir::internal
