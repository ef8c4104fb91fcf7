#include "bench_util.h"

namespace etcdw::bench {

Result<DiskEngine> OpenDiskEngine(const std::string& tag) {
  DiskEngine d;
  d.dir = std::make_unique<testsupport::ScratchDir>("micro-" + tag);
  if (d.dir->path().empty())
    return Internal("cannot create a scratch directory under $TMPDIR (default /tmp)");
  auto engine = storage::Engine::Open(d.dir->path() + "/store", {});
  if (!engine.ok()) return engine.status();
  d.engine = std::move(engine).value();
  return d;
}

bool Check(benchmark::State& state, const Status& st) {
  if (st.ok()) return true;
  state.SkipWithError(st.ToString().c_str());
  return false;
}

std::string MakeValue(size_t size, uint64_t seed) {
  std::string v(size, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (char& c : v) {
    // xorshift64: cheap bytes that neither repeat nor compress.
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>('a' + x % 26);
  }
  return v;
}

}  // namespace etcdw::bench
