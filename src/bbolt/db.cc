#include "etcdw/bbolt/db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_set>

namespace etcdw::bbolt {
namespace {

constexpr size_t kPageHeaderSize = 16;
constexpr size_t kElementSize = 16;  // branch and leaf elements alike
constexpr size_t kMetaSize = 64;     // the meta fields after the page header
constexpr size_t kMetaChecksummed = 56;
constexpr size_t kBucketHeaderSize = 16;
constexpr uint16_t kBranchPage = 0x01;
constexpr uint16_t kLeafPage = 0x02;
constexpr uint16_t kMetaPage = 0x04;
constexpr uint32_t kBucketLeafFlag = 0x01;
// A B+tree of 2^64 entries with two per page is 64 levels deep: deeper means a loop.
constexpr int kMaxDepth = 64;

uint16_t U16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint32_t U32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint64_t U64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One element of a branch or leaf page, its key and value pointing into the page's bytes.
struct Element {
  std::string_view key;
  std::string_view value;  // leaf only
  uint64_t child = 0;      // branch only
  bool is_bucket = false;  // leaf only
};

struct Node {
  bool is_leaf = false;
  std::vector<Element> elements;
};

// A leaf element found by key, copied out of its page.
struct Found {
  std::string value;
  bool is_bucket = false;
};

// Parses a branch or leaf page held in `bytes` (header included). `where` names it in errors.
Result<Node> ParseNode(std::string_view bytes, const std::string& where) {
  if (bytes.size() < kPageHeaderSize) {
    return DataLoss(where + ": shorter than a page header (" + std::to_string(bytes.size()) +
                    " bytes)");
  }
  const uint16_t flags = U16(bytes.data() + 8);
  const uint16_t count = U16(bytes.data() + 10);
  Node n;
  if (flags == kLeafPage) {
    n.is_leaf = true;
  } else if (flags != kBranchPage) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%02x", flags);
    return DataLoss(where + ": not a branch or leaf page (flags " + buf + ")");
  }
  if (kPageHeaderSize + size_t{count} * kElementSize > bytes.size()) {
    return DataLoss(where + ": " + std::to_string(count) + " elements do not fit in its " +
                    std::to_string(bytes.size()) + " bytes");
  }
  if (count == 0 && !n.is_leaf) return DataLoss(where + ": a branch page without elements");
  n.elements.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = kPageHeaderSize + i * kElementSize;
    const char* e = bytes.data() + at;
    Element el;
    uint64_t pos = 0, ksize = 0, vsize = 0;
    if (n.is_leaf) {
      el.is_bucket = (U32(e) & kBucketLeafFlag) != 0;
      pos = U32(e + 4);
      ksize = U32(e + 8);
      vsize = U32(e + 12);
    } else {
      pos = U32(e);
      ksize = U32(e + 4);
      el.child = U64(e + 8);
    }
    const uint64_t begin = at + pos;
    if (begin + ksize + vsize > bytes.size()) {
      return DataLoss(where + ": element " + std::to_string(i) + " lies outside the page (at " +
                      std::to_string(begin) + ", " + std::to_string(ksize + vsize) +
                      " bytes of key and value, page of " + std::to_string(bytes.size()) +
                      " bytes)");
    }
    el.key = bytes.substr(begin, ksize);
    if (n.is_leaf) el.value = bytes.substr(begin + ksize, vsize);
    if (i > 0 && !(n.elements.back().key < el.key)) {
      return DataLoss(where + ": element " + std::to_string(i) + " is out of key order");
    }
    n.elements.push_back(el);
  }
  return n;
}

struct ParsedMeta {
  Meta meta;
  std::string problem;  // empty when valid
};

ParsedMeta ParseMeta(std::string_view page, int which) {
  ParsedMeta pm;
  pm.meta.from_page = which;
  if (page.size() < kPageHeaderSize + kMetaSize) {
    pm.problem = "shorter than a meta page";
    return pm;
  }
  const char* m = page.data() + kPageHeaderSize;
  if ((U16(page.data() + 8) & kMetaPage) == 0) {
    pm.problem = "not a meta page";
    return pm;
  }
  if (U32(m) != kMagic) {
    pm.problem = "no bbolt magic";
    return pm;
  }
  if (U32(m + 4) != kVersion) {
    pm.problem = "version " + std::to_string(U32(m + 4)) + ", not 2";
    return pm;
  }
  if (Fnv1a64(std::string_view(m, kMetaChecksummed)) != U64(m + kMetaChecksummed)) {
    pm.problem = "checksum mismatch";
    return pm;
  }
  pm.meta.page_size = U32(m + 8);
  pm.meta.root_page = U64(m + 16);
  pm.meta.freelist_page = U64(m + 32);
  pm.meta.high_water = U64(m + 40);
  pm.meta.txid = U64(m + 48);
  return pm;
}

bool ValidPageSize(uint32_t s) { return s >= 512 && s <= (1u << 20) && (s & (s - 1)) == 0; }

}  // namespace

uint64_t Fnv1a64(std::string_view data) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool LooksLikeBolt(std::string_view head) {
  if (head.size() < kPageHeaderSize + 8) return false;
  return U32(head.data() + kPageHeaderSize) == kMagic &&
         U32(head.data() + kPageHeaderSize + 4) == kVersion;
}

class BoltDb::Impl {
 public:
  ~Impl() {
    if (fd_ >= 0) close(fd_);
  }

  // Reads `n` bytes at `offset`; an error names what was being read.
  Result<std::string> ReadAt(uint64_t offset, uint64_t n, const std::string& what) const {
    if (offset + n > length_) {
      return DataLoss(Prefix() + what + " lies beyond the end of the database (" +
                      std::to_string(offset + n) + " > " + std::to_string(length_) + " bytes)");
    }
    std::string buf(n, '\0');
    size_t done = 0;
    while (done < n) {
      ssize_t r = pread(fd_, buf.data() + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return DataLoss(Prefix() + "reading " + what + ": " +
                        (r < 0 ? std::string(std::strerror(errno)) : "unexpected end of file"));
      }
      done += static_cast<size_t>(r);
    }
    return buf;
  }

  // The bytes of page `id` and of its overflow pages.
  Result<std::string> ReadPage(uint64_t id, const std::string& referrer) const {
    if (id < 2 || id >= high_water_) {
      return DataLoss(Prefix() + referrer + " points to page " + std::to_string(id) +
                      ", outside the pages in use (2.." + std::to_string(high_water_ - 1) + ")");
    }
    const std::string what = "page " + std::to_string(id);
    ETCDW_ASSIGN_OR_RETURN(std::string head, ReadAt(id * page_size_, page_size_, what));
    if (U64(head.data()) != id) {
      return DataLoss(Prefix() + what + ": its header says page " +
                      std::to_string(U64(head.data())));
    }
    const uint32_t overflow = U32(head.data() + 12);
    if (overflow == 0) return head;
    if (id + overflow >= high_water_) {
      return DataLoss(Prefix() + what + ": " + std::to_string(overflow) +
                      " overflow pages run past the pages in use");
    }
    ETCDW_ASSIGN_OR_RETURN(std::string rest,
                           ReadAt((id + 1) * page_size_, uint64_t{overflow} * page_size_, what));
    return head + rest;
  }

  // A bucket's tree: a root page, or the inline page carried in the bucket's value.
  struct BucketRoot {
    uint64_t page = 0;
    std::string inline_page;  // when page == 0
    std::string name;         // for messages
  };

  Result<BucketRoot> Resolve(const std::vector<std::string>& path) const {
    BucketRoot b{meta_root_, "", "the root bucket"};
    std::string name;
    for (const auto& part : path) {
      name += (name.empty() ? "" : "/") + part;
      ETCDW_ASSIGN_OR_RETURN(std::optional<Found> found, Find(b, part));
      if (!found || !found->is_bucket) return NotFound(Prefix() + "no bucket \"" + name + "\"");
      if (found->value.size() < kBucketHeaderSize) {
        return DataLoss(Prefix() + "bucket \"" + name + "\": its header is " +
                        std::to_string(found->value.size()) + " bytes");
      }
      BucketRoot next;
      next.name = "bucket \"" + name + "\"";
      next.page = U64(found->value.data());
      if (next.page == 0) next.inline_page = found->value.substr(kBucketHeaderSize);
      b = std::move(next);
    }
    return b;
  }

  // The leaf element `key` of bucket `b`, by descent from its root.
  Result<std::optional<Found>> Find(const BucketRoot& b, std::string_view key) const {
    std::string page = b.inline_page;
    std::string where = b.name + " (inline)";
    uint64_t id = b.page;
    for (int depth = 0;; ++depth) {
      if (depth > kMaxDepth) return DataLoss(Prefix() + b.name + ": the tree is deeper than 64");
      if (id != 0) {
        where = "page " + std::to_string(id);
        ETCDW_ASSIGN_OR_RETURN(page, ReadPage(id, b.name));
      }
      ETCDW_ASSIGN_OR_RETURN(Node n, ParseNode(page, Prefix() + where));
      if (n.is_leaf) {
        for (const auto& e : n.elements) {
          if (e.key == key) return std::optional<Found>(Found{std::string(e.value), e.is_bucket});
        }
        return std::optional<Found>();
      }
      // The last child whose first key is <= key (the first child when key is smaller).
      size_t i = 0;
      while (i + 1 < n.elements.size() && n.elements[i + 1].key <= key) ++i;
      if (id != 0 && n.elements[i].child == id) {
        return DataLoss(Prefix() + where + ": points to itself");
      }
      id = n.elements[i].child;
      if (id == 0) return DataLoss(Prefix() + where + ": a branch element points to page 0");
    }
  }

  Status Walk(const BucketRoot& b, const Visitor& visit) const {
    std::unordered_set<uint64_t> visited;
    if (b.page == 0) {
      return WalkNode(b.inline_page, b.name + " (inline)", 0, {}, b, visited, visit);
    }
    return WalkPage(b.page, b.name, 0, {}, b, visited, visit);
  }

  std::string Prefix() const { return "bbolt \"" + path_ + "\": "; }

  int fd_ = -1;
  std::string path_;
  uint64_t length_ = 0;
  uint64_t page_size_ = 0;
  uint64_t high_water_ = 0;
  uint64_t meta_root_ = 0;

 private:
  // The keys a page may hold: a branch element's key is the first key below it, so the keys
  // below element i lie in [key i, key i+1) (for the first element, below key 1 only: Find takes
  // the first child for any smaller key). Pages that hold keys outside it are damage: a walk
  // would list keys out of order, and Find would not find them.
  struct KeyRange {
    std::optional<std::string_view> low;   // none: no lower bound
    std::optional<std::string_view> high;  // none: no upper bound
    bool Holds(std::string_view key) const {
      return (!low || *low <= key) && (!high || key < *high);
    }
  };

  Status WalkPage(uint64_t id, const std::string& referrer, int depth, const KeyRange& range,
                  const BucketRoot& b, std::unordered_set<uint64_t>& visited,
                  const Visitor& visit) const {
    if (depth > kMaxDepth) return DataLoss(Prefix() + b.name + ": the tree is deeper than 64");
    if (!visited.insert(id).second) {
      return DataLoss(Prefix() + "page " + std::to_string(id) + " is reached twice from " + b.name +
                      " (a cycle)");
    }
    ETCDW_ASSIGN_OR_RETURN(std::string page, ReadPage(id, referrer));
    return WalkNode(page, "page " + std::to_string(id), depth, range, b, visited, visit);
  }

  Status WalkNode(const std::string& page, const std::string& where, int depth,
                  const KeyRange& range, const BucketRoot& b, std::unordered_set<uint64_t>& visited,
                  const Visitor& visit) const {
    ETCDW_ASSIGN_OR_RETURN(Node n, ParseNode(page, Prefix() + where));
    for (size_t i = 0; i < n.elements.size(); ++i) {
      const Element& e = n.elements[i];
      if (!range.Holds(e.key)) {
        return DataLoss(Prefix() + where + ": element " + std::to_string(i) +
                        " is outside the key range its branch element gives the page");
      }
      if (n.is_leaf) {
        ETCDW_RETURN_IF_ERROR(
            visit(e.key, e.is_bucket ? std::string_view() : e.value, e.is_bucket));
        continue;
      }
      KeyRange below = range;
      if (i > 0) below.low = e.key;
      if (i + 1 < n.elements.size()) below.high = n.elements[i + 1].key;
      ETCDW_RETURN_IF_ERROR(WalkPage(e.child, where, depth + 1, below, b, visited, visit));
    }
    return Status::Ok();
  }
};

BoltDb::~BoltDb() = default;

Result<std::unique_ptr<BoltDb>> BoltDb::Open(const std::string& path, int64_t length) {
  auto impl = std::make_unique<Impl>();
  impl->path_ = path;
  impl->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->fd_ < 0) {
    return Status(errno == ENOENT ? Code::kNotFound : Code::kInternal,
                  impl->Prefix() + "cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(impl->fd_, &st) != 0) {
    return Internal(impl->Prefix() + "cannot stat: " + std::strerror(errno));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (length >= 0 && static_cast<uint64_t>(length) > size) {
    return DataLoss(impl->Prefix() + "the file holds " + std::to_string(size) +
                    " bytes, fewer than the " + std::to_string(length) + " expected");
  }
  impl->length_ = length >= 0 ? static_cast<uint64_t>(length) : size;
  const uint64_t first = std::min<uint64_t>(impl->length_, kPageHeaderSize + kMetaSize);
  ETCDW_ASSIGN_OR_RETURN(std::string head, impl->ReadAt(0, first, "meta page 0"));
  ParsedMeta m0 = ParseMeta(head, 0);
  // Meta page 1 sits one page further: at the page size meta 0 gives, or (meta 0 damaged) at
  // any page size bbolt may have used.
  std::vector<uint32_t> sizes;
  if (m0.problem.empty() && ValidPageSize(m0.meta.page_size)) {
    sizes = {m0.meta.page_size};
  } else {
    sizes = {4096, 8192, 16384, 32768, 65536, 2048, 1024, 512};
  }
  ParsedMeta m1;
  m1.problem = "not found";
  for (uint32_t ps : sizes) {
    if (ps + kPageHeaderSize + kMetaSize > impl->length_) continue;
    auto p1 = impl->ReadAt(ps, kPageHeaderSize + kMetaSize, "meta page 1");
    if (!p1.ok()) continue;
    ParsedMeta candidate = ParseMeta(*p1, 1);
    if (candidate.problem.empty() && candidate.meta.page_size != ps) {
      candidate.problem =
          "page size " + std::to_string(candidate.meta.page_size) + " does not match its offset";
    }
    // Report the candidate that looked most like meta page 1: valid, else one with the magic.
    const bool magic = candidate.problem != "no bbolt magic" &&
                       candidate.problem != "not a meta page" &&
                       candidate.problem != "shorter than a meta page";
    if (candidate.problem.empty() || magic || sizes.size() == 1) {
      m1 = candidate;
      if (m1.problem.empty()) break;
    }
  }
  const ParsedMeta* chosen = nullptr;
  for (const ParsedMeta* m : {&m0, &m1}) {
    if (!m->problem.empty() || !ValidPageSize(m->meta.page_size)) continue;
    if (chosen == nullptr || m->meta.txid > chosen->meta.txid) chosen = m;
  }
  if (chosen == nullptr) {
    return DataLoss(impl->Prefix() + "no valid meta page (page 0: " +
                    (m0.problem.empty() ? "bad page size" : m0.problem) +
                    "; page 1: " + (m1.problem.empty() ? "bad page size" : m1.problem) + ")");
  }
  const Meta& meta = chosen->meta;
  if (meta.high_water < 3 || meta.high_water > impl->length_ / meta.page_size) {
    return DataLoss(impl->Prefix() + "truncated: " + std::to_string(meta.high_water) +
                    " pages of " + std::to_string(meta.page_size) +
                    " bytes in use, the database holds " + std::to_string(impl->length_) +
                    " bytes");
  }
  impl->page_size_ = meta.page_size;
  impl->high_water_ = meta.high_water;
  impl->meta_root_ = meta.root_page;
  std::unique_ptr<BoltDb> db(new BoltDb());
  db->meta_ = meta;
  db->impl_ = std::move(impl);
  return db;
}

Status BoltDb::ForEach(const std::vector<std::string>& path, const Visitor& visit) const {
  ETCDW_ASSIGN_OR_RETURN(Impl::BucketRoot b, impl_->Resolve(path));
  return impl_->Walk(b, visit);
}

Result<std::optional<std::string>> BoltDb::Get(const std::vector<std::string>& path,
                                               std::string_view key) const {
  ETCDW_ASSIGN_OR_RETURN(Impl::BucketRoot b, impl_->Resolve(path));
  ETCDW_ASSIGN_OR_RETURN(std::optional<Found> e, impl_->Find(b, key));
  if (!e || e->is_bucket) return std::optional<std::string>();
  return std::optional<std::string>(std::move(e->value));
}

Result<bool> BoltDb::HasBucket(const std::vector<std::string>& path) const {
  auto b = impl_->Resolve(path);
  if (b.ok()) return true;
  if (b.status().code() == Code::kNotFound) return false;
  return b.status();
}

}  // namespace etcdw::bbolt
