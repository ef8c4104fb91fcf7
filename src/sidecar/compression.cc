#include "etcdw/sidecar/compression.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lzw.h"

namespace etcdw::sidecar {
namespace {

constexpr size_t kChunk = size_t{64} << 10;

Status IoError(const char* what, const std::string& path, int err) {
  std::string m = std::string(what) + " " + path + ": " + std::strerror(err);
  return err == ENOENT ? NotFound(m) : Internal(m);
}

// A stdio file closed on destruction; Close() reports errors of buffered writes.
class File {
 public:
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (f_ != nullptr) std::fclose(f_);
  }

  Status Open(const std::string& path, const char* mode) {
    path_ = path;
    f_ = std::fopen(path.c_str(), mode);
    return f_ == nullptr ? IoError("open", path, errno) : Status::Ok();
  }
  // Reads up to `n` bytes; 0 at end of file.
  Result<size_t> Read(void* buf, size_t n) {
    size_t got = std::fread(buf, 1, n, f_);
    if (got < n && std::ferror(f_)) return IoError("read", path_, errno);
    return got;
  }
  Status Write(std::string_view data) {
    if (data.empty()) return Status::Ok();
    if (std::fwrite(data.data(), 1, data.size(), f_) != data.size()) {
      return IoError("write", path_, errno);
    }
    return Status::Ok();
  }
  Status Close() {
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) return IoError("close", path_, errno);
    return Status::Ok();
  }

 private:
  FILE* f_ = nullptr;
  std::string path_;
};

std::string_view Bytes(const std::vector<unsigned char>& buf, size_t n) {
  return {reinterpret_cast<const char*>(buf.data()), n};
}

Status Copy(File& in, File& out) {
  std::vector<unsigned char> buf(kChunk);
  for (;;) {
    ETCDW_ASSIGN_OR_RETURN(size_t n, in.Read(buf.data(), buf.size()));
    if (n == 0) return Status::Ok();
    ETCDW_RETURN_IF_ERROR(out.Write(Bytes(buf, n)));
  }
}

int WindowBits(Compression c) { return c == Compression::kGzip ? 15 + 16 : 15; }

Status Deflate(File& in, File& out, Compression c) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(c), 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return Internal("deflateInit2 failed");
  }
  struct Guard {
    z_stream* zs;
    ~Guard() { deflateEnd(zs); }
  } guard{&zs};
  std::vector<unsigned char> inbuf(kChunk), outbuf(kChunk);
  for (;;) {
    ETCDW_ASSIGN_OR_RETURN(size_t n, in.Read(inbuf.data(), inbuf.size()));
    int flush = n == 0 ? Z_FINISH : Z_NO_FLUSH;
    zs.next_in = inbuf.data();
    zs.avail_in = static_cast<uInt>(n);
    int rc;
    do {
      zs.next_out = outbuf.data();
      zs.avail_out = static_cast<uInt>(outbuf.size());
      rc = deflate(&zs, flush);
      if (rc == Z_STREAM_ERROR) return Internal("deflate failed");
      ETCDW_RETURN_IF_ERROR(out.Write(Bytes(outbuf, outbuf.size() - zs.avail_out)));
    } while (zs.avail_out == 0);
    if (flush == Z_FINISH) {
      return rc == Z_STREAM_END ? Status::Ok() : Internal("deflate did not finish the stream");
    }
  }
}

// Inflates `in` to `out`. gzip input may hold several members back to back (as Go's reader and
// the gzip tool accept); anything after the last complete stream that is not another member, and
// any stream that is cut short, is DataLoss.
Status Inflate(File& in, File& out, Compression c, const std::string& src) {
  const bool gzip = c == Compression::kGzip;
  const char* kind = gzip ? "gzip" : "zlib";
  z_stream zs{};
  if (inflateInit2(&zs, WindowBits(c)) != Z_OK) return Internal("inflateInit2 failed");
  struct Guard {
    z_stream* zs;
    ~Guard() { inflateEnd(zs); }
  } guard{&zs};
  std::vector<unsigned char> inbuf(kChunk), outbuf(kChunk);
  bool eof = false;
  bool stream_end = false;   // the last inflate() call completed a stream
  bool output_full = false;  // the last inflate() call may hold more output
  for (;;) {
    if (zs.avail_in == 0 && !eof) {
      ETCDW_ASSIGN_OR_RETURN(size_t n, in.Read(inbuf.data(), inbuf.size()));
      eof = n == 0;
      zs.next_in = inbuf.data();
      zs.avail_in = static_cast<uInt>(n);
    }
    if (zs.avail_in == 0 && (stream_end || !output_full)) break;
    if (stream_end) {  // more input follows a complete stream
      if (!gzip) return DataLoss("trailing data after the zlib stream in " + src);
      inflateReset(&zs);
      stream_end = false;
    }
    zs.next_out = outbuf.data();
    zs.avail_out = static_cast<uInt>(outbuf.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    output_full = zs.avail_out == 0;
    switch (rc) {
      case Z_OK:
      case Z_BUF_ERROR:  // no progress possible without more input
        break;
      case Z_STREAM_END:
        stream_end = true;
        break;
      case Z_NEED_DICT:
        return DataLoss(std::string(kind) + " stream in " + src + " needs a preset dictionary");
      case Z_MEM_ERROR:
        return Internal("inflate: out of memory");
      default:
        return DataLoss(std::string("corrupt ") + kind + " data in " + src + ": " +
                        (zs.msg != nullptr ? zs.msg : "inflate failed"));
    }
    ETCDW_RETURN_IF_ERROR(out.Write(Bytes(outbuf, outbuf.size() - zs.avail_out)));
  }
  if (!stream_end) return DataLoss("truncated " + std::string(kind) + " data in " + src);
  return Status::Ok();
}

Status LzwCompress(File& in, File& out) {
  LzwEncoder enc;
  ByteSink sink = [&out](std::string_view d) { return out.Write(d); };
  std::vector<unsigned char> buf(kChunk);
  for (;;) {
    ETCDW_ASSIGN_OR_RETURN(size_t n, in.Read(buf.data(), buf.size()));
    if (n == 0) return enc.Finish(sink);
    ETCDW_RETURN_IF_ERROR(enc.Write(Bytes(buf, n), sink));
  }
}

Status LzwDecompress(File& in, File& out, const std::string& src) {
  LzwDecoder dec;
  ByteSink sink = [&out](std::string_view d) { return out.Write(d); };
  std::vector<unsigned char> buf(kChunk);
  Status s;
  for (;;) {
    ETCDW_ASSIGN_OR_RETURN(size_t n, in.Read(buf.data(), buf.size()));
    s = n == 0 ? dec.Finish(sink) : dec.Write(Bytes(buf, n), sink);
    if (!s.ok() || n == 0) break;
  }
  if (s.code() == Code::kDataLoss) return DataLoss("lzw data in " + src + ": " + s.message());
  return s;
}

// Runs `body` from `src` into a fresh `dst`; on failure `dst` is removed so that no partial
// output is left behind.
template <typename Body>
Status FileToFile(const std::string& src, const std::string& dst, Body body) {
  File in;
  ETCDW_RETURN_IF_ERROR(in.Open(src, "rb"));
  File out;
  ETCDW_RETURN_IF_ERROR(out.Open(dst, "wb"));
  Status s = body(in, out);
  Status closed = out.Close();
  if (s.ok()) s = closed;
  if (!s.ok()) std::remove(dst.c_str());
  return s;
}

}  // namespace

Result<Compression> ParseCompressionPolicy(std::string_view policy) {
  if (policy == "gzip") return Compression::kGzip;
  if (policy == "zlib") return Compression::kZlib;
  if (policy == "lzw") return Compression::kLzw;
  return InvalidArgument("unsupported compression policy \"" + std::string(policy) +
                         "\" (supported: gzip, zlib, lzw)");
}

std::string_view CompressionSuffix(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return ".gz";
    case Compression::kZlib:
      return ".zlib";
    case Compression::kLzw:
      return ".Z";
    case Compression::kNone:
      break;
  }
  return "";
}

Result<Compression> CompressionFromSuffix(std::string_view suffix) {
  if (suffix.empty()) return Compression::kNone;
  if (suffix == ".gz") return Compression::kGzip;
  if (suffix == ".zlib") return Compression::kZlib;
  if (suffix == ".Z") return Compression::kLzw;
  return InvalidArgument("unknown compression suffix \"" + std::string(suffix) +
                         "\" (known: .gz, .zlib, .Z)");
}

Status CompressFile(const std::string& src, const std::string& dst, Compression c) {
  return FileToFile(src, dst, [c](File& in, File& out) {
    switch (c) {
      case Compression::kGzip:
      case Compression::kZlib:
        return Deflate(in, out, c);
      case Compression::kLzw:
        return LzwCompress(in, out);
      case Compression::kNone:
        break;
    }
    return Copy(in, out);
  });
}

Status DecompressFile(const std::string& src, const std::string& dst, Compression c) {
  return FileToFile(src, dst, [c, &src](File& in, File& out) {
    switch (c) {
      case Compression::kGzip:
      case Compression::kZlib:
        return Inflate(in, out, c, src);
      case Compression::kLzw:
        return LzwDecompress(in, out, src);
      case Compression::kNone:
        break;
    }
    return Copy(in, out);
  });
}

}  // namespace etcdw::sidecar
