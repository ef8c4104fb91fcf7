#include "etcdw/common/thread_name.h"

#include <pthread.h>

namespace etcdw::common {

namespace {
constexpr size_t kMaxName = 15;  // the kernel's TASK_COMM_LEN, without the terminating NUL
}

void NameThisThread(std::string_view name) {
  std::string cut(name.substr(0, kMaxName));
  // Fails only for a name that is too long, which the cut rules out; a name is a courtesy to
  // whoever inspects the process, so there is nothing to report either way.
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

void NameThread(std::thread& t, std::string_view name) {
  std::string cut(name.substr(0, kMaxName));
  // A thread that already ended cannot be named (ENOENT); nothing lists it any more.
  (void)pthread_setname_np(t.native_handle(), cut.c_str());
}

std::string ThisThreadName() {
  char buf[kMaxName + 1] = {};
  if (pthread_getname_np(pthread_self(), buf, sizeof buf) != 0) return "";
  return buf;
}

}  // namespace etcdw::common
