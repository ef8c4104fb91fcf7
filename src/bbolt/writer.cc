#include "etcdw/bbolt/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "etcdw/bbolt/db.h"

namespace etcdw::bbolt {
namespace {

constexpr size_t kPage = kWriterPageSize;
constexpr size_t kHeader = 16;  // page header: id u64, flags u16, count u16, overflow u32
constexpr size_t kElement = 16;
constexpr uint16_t kBranchFlag = 0x01;
constexpr uint16_t kLeafFlag = 0x02;
constexpr uint16_t kMetaFlag = 0x04;
constexpr uint16_t kFreelistFlag = 0x10;
constexpr uint32_t kBucketElement = 0x01;
constexpr size_t kMaxElements = 0xFFFF;  // the page header's u16 count
// A leaf that already spans overflow pages (it holds an entry bigger than a page) takes further
// entries up to this size, so that big values share runs of pages as bbolt's own leaves do
// rather than leaving most of a last page empty each (8 KiB values: 3 pages for one, 15 for
// seven). Leaves of entries smaller than a page stay one page each, for a normal fan-out.
constexpr size_t kPackedLeafBytes = size_t{64} << 10;
// Pages are collected and written in runs of this many bytes.
constexpr size_t kWriteBuffer = size_t{1} << 20;

void PutU16(std::string& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, sizeof v); }
void PutU32(std::string& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, sizeof v); }
void PutU64(std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, sizeof v); }

// A page (and its overflow pages) holding `used` bytes: its header filled in, zero padded.
std::string NewPage(size_t used, uint16_t flags, size_t count) {
  const size_t pages = (used + kPage - 1) / kPage;
  std::string b(std::max<size_t>(pages, 1) * kPage, '\0');
  PutU16(b, 8, flags);
  PutU16(b, 10, static_cast<uint16_t>(count));
  PutU32(b, 12, static_cast<uint32_t>(std::max<size_t>(pages, 1) - 1));
  return b;
}

}  // namespace

class BoltWriter::Impl {
 public:
  ~Impl() {
    if (fd_ >= 0) close(fd_);
    if (!finished_) unlink(path_.c_str());
  }

  Status Open(const std::string& path) {
    path_ = path;
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      const int err = errno;
      finished_ = true;  // nothing of ours to remove
      return Status(err == EEXIST ? Code::kAlreadyExists : Code::kInternal,
                    Prefix() + "cannot create: " + std::strerror(err));
    }
    // Pages 0 and 1 (the meta pages) are written by Finish; the data starts at page 2.
    next_page_ = 2;
    return Status::Ok();
  }

  Status BeginBucket(std::string_view name) {
    ETCDW_RETURN_IF_ERROR(Usable());
    if (name.empty()) return Fail(InvalidArgument(Prefix() + "a bucket needs a name"));
    if (name.size() > kMaxKeySize) {
      return Fail(InvalidArgument(Prefix() + "bucket name of " + std::to_string(name.size()) +
                                  " bytes is over bbolt's limit of " +
                                  std::to_string(kMaxKeySize)));
    }
    if (buckets_ > 0 && !(last_bucket_ < name)) {
      return Fail(InvalidArgument(Prefix() + "bucket \"" + std::string(name) +
                                  "\" does not sort after \"" + last_bucket_ + "\""));
    }
    ETCDW_RETURN_IF_ERROR(EndBucket());
    last_bucket_.assign(name);
    ++buckets_;
    bucket_open_ = true;
    tree_ = Tree{};
    return Status::Ok();
  }

  Status Put(std::string_view key, std::string_view value) {
    ETCDW_RETURN_IF_ERROR(Usable());
    if (!bucket_open_) return Fail(FailedPrecondition(Prefix() + "Put before any BeginBucket"));
    const std::string where = Prefix() + "bucket \"" + last_bucket_ + "\": ";
    if (key.empty()) return Fail(InvalidArgument(where + "an empty key"));
    if (key.size() > kMaxKeySize || value.size() > kMaxValueSize) {
      return Fail(InvalidArgument(where + "a key of " + std::to_string(key.size()) +
                                  " bytes or a value of " + std::to_string(value.size()) +
                                  " bytes is over bbolt's limits"));
    }
    if (tree_.entries > 0 && !(tree_.last_key < key)) {
      return Fail(InvalidArgument(where + "a key does not sort after the one before it"));
    }
    tree_.last_key.assign(key);
    ++tree_.entries;
    ++stats_.entries;
    return AddLeafElement(tree_, 0, key, value);
  }

  Result<WriterStats> Finish() {
    ETCDW_RETURN_IF_ERROR(Usable());
    ETCDW_RETURN_IF_ERROR(EndBucket());
    // The root bucket: one element per top-level bucket, its value a bucket header.
    Tree root;
    for (const auto& [name, page] : bucket_roots_) {
      std::string header(16, '\0');
      PutU64(header, 0, page);  // root page; the sequence (bytes 8..15) stays 0
      ETCDW_RETURN_IF_ERROR(AddLeafElement(root, kBucketElement, name, header));
    }
    ETCDW_ASSIGN_OR_RETURN(const uint64_t root_page, EndTree(root));
    const uint64_t freelist_page = next_page_;
    ETCDW_RETURN_IF_ERROR(EmitPage(NewPage(kHeader, kFreelistFlag, 0)));
    ETCDW_RETURN_IF_ERROR(FlushBuffer());
    stats_.pages = next_page_;
    stats_.buckets = buckets_;
    for (uint64_t id = 0; id < 2; ++id) {
      ETCDW_RETURN_IF_ERROR(WriteAt(MetaPage(id, root_page, freelist_page), id * kPage));
    }
    if (close(fd_) != 0) {
      fd_ = -1;
      return Fail(Internal(Prefix() + "close: " + std::strerror(errno)));
    }
    fd_ = -1;
    finished_ = true;
    return stats_;
  }

 private:
  // One B+tree being built: the open leaf page and one open branch page per level above it.
  struct LeafElement {
    uint32_t flags;
    std::string key;
    std::string value;
  };
  struct BranchElement {
    std::string key;  // the first key of the child
    uint64_t child;
  };
  struct Level {
    std::vector<BranchElement> open;
    size_t bytes = kHeader;
    uint64_t written = 0;  // pages of this level written so far
  };
  struct Tree {
    std::vector<LeafElement> leaf;
    size_t leaf_bytes = kHeader;
    uint64_t leaves_written = 0;
    std::vector<Level> levels;  // levels[0]: the parents of leaves
    std::string last_key;
    uint64_t entries = 0;
  };

  std::string Prefix() const { return "bbolt writer \"" + path_ + "\": "; }

  Status Usable() const {
    if (!failed_.ok()) return failed_;
    if (finished_) return FailedPrecondition(Prefix() + "the file is finished");
    return Status::Ok();
  }
  // Records the first failure: the file is unusable from then on.
  Status Fail(Status st) {
    if (failed_.ok()) failed_ = st;
    return st;
  }

  Status EndBucket() {
    if (!bucket_open_) return Status::Ok();
    bucket_open_ = false;
    ETCDW_ASSIGN_OR_RETURN(const uint64_t page, EndTree(tree_));
    bucket_roots_.emplace_back(last_bucket_, page);
    tree_ = Tree{};
    return Status::Ok();
  }

  Status AddLeafElement(Tree& t, uint32_t flags, std::string_view key, std::string_view value) {
    const size_t need = kElement + key.size() + value.size();
    const size_t after = t.leaf_bytes + need;
    const bool fits = after <= kPage || (t.leaf_bytes > kPage && after <= kPackedLeafBytes);
    if (!t.leaf.empty() && (!fits || t.leaf.size() == kMaxElements)) {
      ETCDW_RETURN_IF_ERROR(WriteLeaf(t));
    }
    t.leaf.push_back(LeafElement{flags, std::string(key), std::string(value)});
    t.leaf_bytes += need;
    return Status::Ok();
  }

  Status WriteLeaf(Tree& t) {
    std::string page = NewPage(t.leaf_bytes, kLeafFlag, t.leaf.size());
    size_t data = kHeader + t.leaf.size() * kElement;
    for (size_t i = 0; i < t.leaf.size(); ++i) {
      const LeafElement& e = t.leaf[i];
      const size_t at = kHeader + i * kElement;
      PutU32(page, at, e.flags);
      PutU32(page, at + 4, static_cast<uint32_t>(data - at));
      PutU32(page, at + 8, static_cast<uint32_t>(e.key.size()));
      PutU32(page, at + 12, static_cast<uint32_t>(e.value.size()));
      std::memcpy(page.data() + data, e.key.data(), e.key.size());
      data += e.key.size();
      std::memcpy(page.data() + data, e.value.data(), e.value.size());
      data += e.value.size();
    }
    const uint64_t id = next_page_;
    std::string first = t.leaf.empty() ? std::string() : std::move(t.leaf.front().key);
    ETCDW_RETURN_IF_ERROR(EmitPage(std::move(page)));
    t.leaf.clear();
    t.leaf_bytes = kHeader;
    ++t.leaves_written;
    return AddBranchElement(t, 0, std::move(first), id);
  }

  Status AddBranchElement(Tree& t, size_t level, std::string key, uint64_t child) {
    if (t.levels.size() <= level) t.levels.resize(level + 1);
    Level& l = t.levels[level];
    const size_t need = kElement + key.size();
    // A branch page holds at least two children (more pages when the keys are long), so that
    // every level divides the one below it and the tree's height stays logarithmic.
    if (l.open.size() >= 2 && (l.bytes + need > kPage || l.open.size() == kMaxElements)) {
      ETCDW_RETURN_IF_ERROR(WriteBranch(t, level));
    }
    Level& same = t.levels[level];  // WriteBranch may have grown the vector
    same.bytes += need;
    same.open.push_back(BranchElement{std::move(key), child});
    return Status::Ok();
  }

  Status WriteBranch(Tree& t, size_t level) {
    std::vector<BranchElement> elements = std::move(t.levels[level].open);
    const size_t bytes = t.levels[level].bytes;
    t.levels[level].open.clear();
    t.levels[level].bytes = kHeader;
    ++t.levels[level].written;
    std::string page = NewPage(bytes, kBranchFlag, elements.size());
    size_t data = kHeader + elements.size() * kElement;
    for (size_t i = 0; i < elements.size(); ++i) {
      const size_t at = kHeader + i * kElement;
      PutU32(page, at, static_cast<uint32_t>(data - at));
      PutU32(page, at + 4, static_cast<uint32_t>(elements[i].key.size()));
      PutU64(page, at + 8, elements[i].child);
      std::memcpy(page.data() + data, elements[i].key.data(), elements[i].key.size());
      data += elements[i].key.size();
    }
    const uint64_t id = next_page_;
    ETCDW_RETURN_IF_ERROR(EmitPage(std::move(page)));
    return AddBranchElement(t, level + 1, std::move(elements.front().key), id);
  }

  // Writes what is still open, bottom-up, and returns the tree's root page: the only leaf of a
  // tree that fits one page, else the branch page at the top.
  Result<uint64_t> EndTree(Tree& t) {
    if (!t.leaf.empty() || t.leaves_written == 0) ETCDW_RETURN_IF_ERROR(WriteLeaf(t));
    for (size_t level = 0;; ++level) {
      Level& l = t.levels[level];
      const bool top = level + 1 == t.levels.size();
      if (top && l.written == 0 && l.open.size() == 1) return l.open.front().child;
      if (!l.open.empty()) ETCDW_RETURN_IF_ERROR(WriteBranch(t, level));
    }
  }

  // Appends a page (with its overflow pages) at the next page id.
  Status EmitPage(std::string page) {
    PutU64(page, 0, next_page_);
    const uint64_t pages = page.size() / kPage;
    stats_.overflow_pages += pages - 1;
    next_page_ += pages;
    buffer_ += page;
    if (buffer_.size() >= kWriteBuffer) return FlushBuffer();
    return Status::Ok();
  }

  Status FlushBuffer() {
    if (buffer_.empty()) return Status::Ok();
    ETCDW_RETURN_IF_ERROR(WriteAt(buffer_, buffer_start_ * kPage));
    buffer_start_ = next_page_;
    buffer_.clear();
    return Status::Ok();
  }

  Status WriteAt(const std::string& bytes, uint64_t offset) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return Fail(Internal(Prefix() + "writing at byte " + std::to_string(offset + done) + ": " +
                             (n < 0 ? std::strerror(errno) : "no progress")));
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  std::string MetaPage(uint64_t id, uint64_t root_page, uint64_t freelist_page) const {
    std::string page(kPage, '\0');
    PutU64(page, 0, id);
    PutU16(page, 8, kMetaFlag);
    const size_t m = kHeader;
    PutU32(page, m, kMagic);
    PutU32(page, m + 4, kVersion);
    PutU32(page, m + 8, static_cast<uint32_t>(kPage));
    PutU32(page, m + 12, 0);  // flags
    PutU64(page, m + 16, root_page);
    PutU64(page, m + 24, 0);  // the root bucket's sequence
    PutU64(page, m + 32, freelist_page);
    PutU64(page, m + 40, next_page_);  // high-water mark
    PutU64(page, m + 48, id + 1);      // transaction id: page 1 is the newer
    PutU64(page, m + 56, Fnv1a64(std::string_view(page).substr(m, 56)));
    return page;
  }

  std::string path_;
  int fd_ = -1;
  bool finished_ = false;
  Status failed_ = Status::Ok();
  uint64_t next_page_ = 0;
  uint64_t buffer_start_ = 2;  // the page id of buffer_'s first byte
  std::string buffer_;
  bool bucket_open_ = false;
  std::string last_bucket_;
  uint64_t buckets_ = 0;
  Tree tree_;
  std::vector<std::pair<std::string, uint64_t>> bucket_roots_;
  WriterStats stats_;
};

BoltWriter::BoltWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BoltWriter::~BoltWriter() = default;

Result<std::unique_ptr<BoltWriter>> BoltWriter::Create(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  ETCDW_RETURN_IF_ERROR(impl->Open(path));
  return std::unique_ptr<BoltWriter>(new BoltWriter(std::move(impl)));
}

Status BoltWriter::BeginBucket(std::string_view name) { return impl_->BeginBucket(name); }
Status BoltWriter::Put(std::string_view key, std::string_view value) {
  return impl_->Put(key, value);
}
Result<WriterStats> BoltWriter::Finish() { return impl_->Finish(); }

}  // namespace etcdw::bbolt
