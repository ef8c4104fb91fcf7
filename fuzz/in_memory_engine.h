// A store engine in memory for the harnesses that drive code reading the store.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "etcdw/storage/engine.h"

namespace etcdw::fuzz {

// The process's engine, in memory, opened at the first call (opening takes long); each input
// replaces what the last one wrote. The deletions leave tombstones that every read walks over,
// so every 64th call compacts it first. Aborts if it cannot be opened or compacted.
inline storage::Engine& InMemoryEngine() {
  static const std::unique_ptr<storage::Engine> engine = [] {
    storage::EngineOptions opts;
    opts.in_memory = true;
    opts.block_cache_bytes = size_t{1} << 20;
    opts.write_buffer_bytes = size_t{1} << 20;
    auto e = storage::Engine::Open("/fuzz", opts);
    if (!e.ok()) {
      std::fprintf(stderr, "the in-memory engine does not open: %s\n",
                   e.status().message().c_str());
      std::abort();
    }
    return std::move(e).value();
  }();
  static uint64_t calls = 0;
  if (++calls % 64 == 0 && !engine->CompactAll().ok()) {
    std::fprintf(stderr, "compacting the in-memory engine failed\n");
    std::abort();
  }
  return *engine;
}

}  // namespace etcdw::fuzz
