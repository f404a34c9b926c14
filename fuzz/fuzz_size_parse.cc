// fuzz_size_parse: ParseSize / FormatSize (common/size_parse.h) and the
// Mooncake-convention ParseMooncakeSize (capi/compat_config.h).
//
// Invariants checked on every input (docs/fuzzing.md):
//  1. FormatSize(x) parses back to x, for x taken from the input's first 8
//     bytes, and for every value ParseSize accepts.
//  2. ParseSize accepts exactly the strings of its grammar, digits then an
//     optional B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (case-insensitive),
//     whose value fits in 64 bits, and returns that value; checked against
//     an independent 128-bit reference parser.
//  3. ParseMooncakeSize accepts everything ParseSize accepts, with the same
//     value; never accepts a character outside digits, '.', whitespace and
//     the unit letters (no '%', sign, exponent); and on strings without '.'
//     or whitespace agrees with ParseSize exactly.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "capi/compat_config.h"
#include "common/size_parse.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& input) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n  input: '", what);
  for (unsigned char c : input) {
    if (c >= 0x20 && c < 0x7f)
      std::fputc(c, stderr);
    else
      std::fprintf(stderr, "\\x%02x", c);
  }
  std::fprintf(stderr, "'\n");
  std::abort();
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

// The reference: nullopt when `s` is not in ParseSize's grammar or its value
// does not fit in 64 bits.
std::optional<uint64_t> ReferenceParse(const std::string& s) {
  size_t i = 0;
  unsigned __int128 n = 0;
  bool big = false;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    n = n * 10 + unsigned(s[i] - '0');
    if (n > UINT64_MAX) big = true, n = UINT64_MAX + (unsigned __int128)1;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string suffix;
  for (size_t j = i; j < s.size(); ++j) suffix += Lower(s[j]);
  int shift = -1;
  if (suffix.empty() || suffix == "b") shift = 0;
  const char* units = "kmgt";
  for (int u = 0; u < 4; ++u) {
    const std::string one(1, units[u]);
    if (suffix == one || suffix == one + "b" || suffix == one + "ib") {
      shift = 10 * (u + 1);
    }
  }
  if (shift < 0 || big) return std::nullopt;
  const unsigned __int128 v = n << shift;
  if (v > UINT64_MAX) return std::nullopt;
  return uint64_t(v);
}

void CheckRoundTrip(uint64_t x, const std::string& input) {
  const std::string f = kvpool::FormatSize(x);
  auto back = kvpool::ParseSize(f);
  if (!back.ok()) Fail("ParseSize(FormatSize(x)) fails", input + " / " + f);
  if (back.value() != x) Fail("ParseSize(FormatSize(x)) != x", f);
  if (kvpool::FormatSize(back.value()) != f) Fail("FormatSize not stable", f);
}

bool MooncakeChar(char c) {
  if (c >= '0' && c <= '9') return true;
  switch (Lower(c)) {
    case '.':
    case ' ':
    case '\t':
    case '\r':
    case '\n':
    case 'b':
    case 'i':
    case 'k':
    case 'm':
    case 'g':
    case 't':
      return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);

  // 1. Round trip of a 64-bit value taken from the input.
  if (size >= 8) {
    uint64_t x = 0;
    std::memcpy(&x, data, 8);
    CheckRoundTrip(x, s);
    // Values near the top of the range and at unit multiples.
    CheckRoundTrip(UINT64_MAX - (x & 0xffff), s);
    CheckRoundTrip((x & 0xffffff) << ((x >> 56) % 41), s);
  }

  // 2. ParseSize against the reference.
  auto got = kvpool::ParseSize(s);
  const std::optional<uint64_t> want = ReferenceParse(s);
  if (got.ok() != want.has_value()) {
    Fail(got.ok() ? "ParseSize accepts a string outside its grammar"
                  : "ParseSize rejects a valid size",
         s);
  }
  if (got.ok()) {
    if (got.value() != *want) Fail("ParseSize returns a wrong value", s);
    CheckRoundTrip(got.value(), s);
  }

  // 3. ParseMooncakeSize.
  auto mc = kvpool::compat::ParseMooncakeSize(s);
  if (got.ok() && (!mc.ok() || mc.value() != got.value())) {
    Fail("ParseMooncakeSize disagrees with ParseSize on a kvpool size", s);
  }
  if (mc.ok()) {
    for (char c : s) {
      if (!MooncakeChar(c)) {
        Fail("ParseMooncakeSize accepts a forbidden character", s);
      }
    }
    if (s.find_first_of(". \t\r\n") == std::string::npos && !got.ok()) {
      Fail("ParseMooncakeSize accepts a plain size ParseSize rejects", s);
    }
  }
  return 0;
}
