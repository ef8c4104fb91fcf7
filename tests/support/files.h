// Files in tests: reading and writing whole files, and damaging one byte. Header-only: the unit
// tests (also built under the sanitizers) and the micro-benchmarks link no test support library.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace etcdw::testsupport {

// The whole file; empty when it cannot be read (tests that must tell the two apart check
// existence first).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the file's contents (creating it); false when it cannot be written.
inline bool WriteFile(const std::string& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  return !out.fail();
}

// Flips the bits of `mask` in the byte at `offset`, in place; false when the file has no such
// byte or cannot be written.
inline bool FlipByte(const std::string& path, uint64_t offset, uint8_t mask = 0x10) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) return false;
  f.seekg(static_cast<std::streamoff>(offset));
  char c;
  if (!f.read(&c, 1)) return false;
  c = static_cast<char>(c ^ mask);
  f.seekp(static_cast<std::streamoff>(offset));
  return static_cast<bool>(f.write(&c, 1));
}

}  // namespace etcdw::testsupport
