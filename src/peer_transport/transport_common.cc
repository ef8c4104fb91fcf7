#include "transport_common.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>

namespace etcdw::peer_transport {

namespace {
// TCP keepalive and user timeout: a silent peer is detected in about 20-30 s.
constexpr int kKeepIdleSeconds = 10;
constexpr int kKeepIntervalSeconds = 5;
constexpr int kKeepCount = 3;
constexpr unsigned kUserTimeoutMs = 30000;
}  // namespace

milliseconds ClampTimeout(milliseconds t) {
  return std::clamp(t, milliseconds::zero(), kMaxTimeout);
}

std::string HexId(uint64_t id) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(id));
  return b;
}

std::string Millis(milliseconds d) { return std::to_string(d.count()) + "ms"; }

std::string ErrorText(const error_code& ec) {
  std::string m = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    // OpenSSL's reason string alone (e.g. "certificate verify failed") is often too terse.
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    if (m.empty()) m = buf;
  }
  return m;
}

void SetSocketOptions(Tcp::socket& s) {
  error_code ec;
  s.set_option(Tcp::no_delay(true), ec);
  s.set_option(asio::socket_base::keep_alive(true), ec);
  const int fd = s.native_handle();
  const int idle = kKeepIdleSeconds, intvl = kKeepIntervalSeconds, cnt = kKeepCount;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  const unsigned user_timeout = kUserTimeoutMs;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

}  // namespace etcdw::peer_transport
