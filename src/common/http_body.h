// Beast body types of HttpClient::Send (private to src/common): a request body that is text or a
// file range read while sending, and a response body that is text or, for 2xx answers, a file
// written while receiving. Both count the bytes they move so that the client can tell a slow
// transfer from a stalled one.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace etcdw::common::detail {

// Request body. Text mode when fd < 0; else `length` bytes of the file from `offset` (the fd is
// owned by the caller and read with pread, so one file may feed several requests at once).
struct SourceBody {
  struct value_type {
    std::string text;
    int fd = -1;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t* progress = nullptr;    // incremented by every byte handed to the connection
    std::string file_name;           // for read_error
    mutable std::string read_error;  // set when the file could not be read
  };

  static uint64_t size(const value_type& v) { return v.fd >= 0 ? v.length : v.text.size(); }

  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool isRequest, class Fields>
    writer(const boost::beast::http::header<isRequest, Fields>&, const value_type& body)
        : body_(body) {}

    void init(boost::system::error_code& ec) {
      ec = {};
      if (body_.fd >= 0) buffer_.resize(64 << 10);
    }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::system::error_code& ec) {
      ec = {};
      if (body_.fd < 0) {
        if (done_ || body_.text.empty()) return boost::none;
        done_ = true;
        Count(body_.text.size());
        return std::make_pair(const_buffers_type(body_.text.data(), body_.text.size()), false);
      }
      if (sent_ == body_.length) return boost::none;
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(buffer_.size(), body_.length - sent_));
      ssize_t n;
      do {
        n = ::pread(body_.fd, buffer_.data(), want, static_cast<off_t>(body_.offset + sent_));
      } while (n < 0 && errno == EINTR);
      if (n <= 0) {
        // A file shorter than promised would make the message lie about its length.
        ec = n < 0 ? boost::system::error_code(errno, boost::system::system_category())
                   : boost::system::errc::make_error_code(boost::system::errc::io_error);
        body_.read_error = "read \"" + body_.file_name + "\": " +
                           (n < 0 ? ec.message() : std::string("file shorter than the body"));
        return boost::none;
      }
      sent_ += static_cast<uint64_t>(n);
      Count(static_cast<uint64_t>(n));
      return std::make_pair(const_buffers_type(buffer_.data(), static_cast<size_t>(n)),
                            sent_ < body_.length);
    }

   private:
    void Count(uint64_t n) {
      if (body_.progress != nullptr) *body_.progress += n;
    }
    const value_type& body_;
    std::vector<char> buffer_;
    uint64_t sent_ = 0;
    bool done_ = false;
  };
};

// Response body. When file_path is set and the status is 2xx, the body goes to that file
// (created or truncated, 0600; the fd is left in value_type::fd for the caller to close);
// otherwise into `text`, at most text_limit bytes.
struct SinkBody {
  struct value_type {
    std::string text;
    std::string file_path;
    int fd = -1;
    uint64_t text_limit = 64 << 20;
    uint64_t* progress = nullptr;  // incremented by every body byte received
    std::string file_error;        // why file_path could not be opened or written
  };

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>& h, value_type& body) : body_(body) {
      // The header is parsed after construction: read the status in init().
      if constexpr (!isRequest) status_ = [&h] { return h.result_int(); };
    }

    void init(const boost::optional<uint64_t>& content_length, boost::system::error_code& ec) {
      ec = {};
      const unsigned status = status_ ? status_() : 0;
      to_file_ = !body_.file_path.empty() && status >= 200 && status < 300;
      if (to_file_) {
        body_.fd = ::open(body_.file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (body_.fd < 0) {
          ec = boost::system::error_code(errno, boost::system::system_category());
          body_.file_error = "open \"" + body_.file_path + "\": " + ec.message();
        }
        return;
      }
      if (content_length && *content_length > body_.text_limit) {
        ec = boost::beast::http::error::body_limit;
        return;
      }
      if (content_length) body_.text.reserve(static_cast<size_t>(*content_length));
    }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
      ec = {};
      size_t total = 0;
      for (const auto b : boost::beast::buffers_range_ref(buffers)) {
        const char* p = static_cast<const char*>(b.data());
        size_t left = b.size();
        if (!to_file_) {
          if (body_.text.size() + left > body_.text_limit) {
            ec = boost::beast::http::error::body_limit;
            return total;
          }
          body_.text.append(p, left);
          total += left;
          continue;
        }
        while (left > 0) {
          ssize_t n = ::write(body_.fd, p, left);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            ec = boost::system::error_code(errno, boost::system::system_category());
            body_.file_error = "write \"" + body_.file_path + "\": " + ec.message();
            return total;
          }
          p += n;
          left -= static_cast<size_t>(n);
          total += static_cast<size_t>(n);
        }
      }
      if (body_.progress != nullptr) *body_.progress += total;
      return total;
    }

    void finish(boost::system::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
    std::function<unsigned()> status_;
    bool to_file_ = false;
  };
};

}  // namespace etcdw::common::detail
