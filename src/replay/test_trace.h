// A tiny trace for the replay's tests, written to a file.
#ifndef KVPOOL_REPLAY_TEST_TRACE_H_
#define KVPOOL_REPLAY_TEST_TRACE_H_

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace kvpool::replay::testing {

// `fill` requests of 6 fresh blocks each, then `measured` requests whose
// first 4 blocks are blocks of the fill part and whose last 2 are new.
// Requests arrive `gap_ms` apart.
inline std::string WriteTinyTrace(const std::string& path, int fill = 24,
                                  int measured = 10, int gap_ms = 50) {
  std::ofstream out(path);
  uint64_t next = 0;
  int t = 0;
  for (int i = 0; i < fill; ++i, t += gap_ms) {
    out << fmt::format(
               R"({{"timestamp": {}, "input_length": 3000, "output_length": 4, "hash_ids": [{}, {}, {}, {}, {}, {}]}})",
               t, next, next + 1, next + 2, next + 3, next + 4, next + 5)
        << "\n";
    next += 6;
  }
  for (int i = 0; i < measured; ++i, t += gap_ms) {
    const uint64_t base = uint64_t(i % fill) * 6;
    out << fmt::format(
               R"({{"timestamp": {}, "input_length": 2900, "output_length": 8, "hash_ids": [{}, {}, {}, {}, {}, {}]}})",
               t, base, base + 1, base + 2, base + 3, next, next + 1)
        << "\n";
    next += 2;
  }
  return path;
}

inline std::string TempPath(const std::string& name) {
  return fmt::format("/tmp/kvpool-replay-test-{}-{}", getpid(), name);
}

}  // namespace kvpool::replay::testing

#endif  // KVPOOL_REPLAY_TEST_TRACE_H_
