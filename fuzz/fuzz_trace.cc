// fuzz_trace: the replay's trace parser (replay/trace.h, ReadTrace) on
// arbitrary file contents.
//
// Invariants checked (docs/fuzzing.md):
//  1. A parsed trace has one request per non-blank line (a line with only
//     spaces, tabs and CRs is blank), in file order, and its timestamps
//     never decrease.
//  2. Each request holds exactly the numbers its line carries: the line is
//     a JSON object whose "timestamp" is a number equal to timestamp_ms and
//     whose "input_length", "output_length" and "hash_ids" entries are
//     non-negative integers equal to the parsed ones (nothing wraps, is
//     truncated or is taken from a bool).
//  3. With a limit L, the parse is the first L requests of the full parse
//     (when both succeed), and a failure is INVALID_PARAMS.
//  4. Writing the parsed trace back out as JSON lines and reading that
//     gives the same trace.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "replay/trace.h"

namespace {

using kvpool::replay::ReadTrace;
using kvpool::replay::TraceRequest;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", what);
  std::abort();
}

std::string TempPath(const char* tag) {
  return std::string("/dev/shm/kvpool-fuzz-trace-") + std::to_string(getpid()) +
         "-" + tag + ".jsonl";
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

bool Same(const TraceRequest& a, const TraceRequest& b) {
  return a.timestamp_ms == b.timestamp_ms && a.input_length == b.input_length &&
         a.output_length == b.output_length && a.hash_ids == b.hash_ids;
}

bool UnsignedEquals(const nlohmann::json& j, uint64_t v) {
  return j.is_number_unsigned() && j.get<uint64_t>() == v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t limit = data[0] % 4;  // 0 = all
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  static const std::string path = TempPath("in");
  static const std::string again = TempPath("again");
  // Both files go when the process exits (atexit runs at libFuzzer's and
  // the seed driver's exit), not a pair per run left in /dev/shm.
  static const bool cleanup = [] {
    return std::atexit([] {
             ::unlink(path.c_str());
             ::unlink(again.c_str());
           }) == 0;
  }();
  (void)cleanup;
  WriteFile(path, text);

  auto full = ReadTrace(path, 0);
  if (!full.ok() && full.status().code() != kvpool::ErrorCode::INVALID_PARAMS) {
    Fail("a parse error that is not INVALID_PARAMS");
  }
  if (full.ok()) {
    const std::vector<TraceRequest>& t = full.value();
    // 1 and 2: one request per non-blank line, holding that line's numbers.
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) nl = text.size();
      std::string line = text.substr(start, nl - start);
      if (line.find_first_not_of(" \t\r") != std::string::npos) {
        lines.push_back(std::move(line));
      }
      start = nl + 1;
    }
    if (lines.size() != t.size()) Fail("request count != non-blank lines");
    for (size_t i = 0; i < t.size(); ++i) {
      if (i > 0 && t[i].timestamp_ms < t[i - 1].timestamp_ms) {
        Fail("timestamps decrease");
      }
      const auto j = nlohmann::json::parse(lines[i], nullptr, false);
      if (j.is_discarded() || !j.is_object()) Fail("accepted a non-object");
      const auto& ts = j.at("timestamp");
      if (!ts.is_number() || ts.get<double>() != t[i].timestamp_ms) {
        Fail("timestamp is not the line's number");
      }
      if (!UnsignedEquals(j.at("input_length"), t[i].input_length) ||
          !UnsignedEquals(j.at("output_length"), t[i].output_length)) {
        Fail("a length is not the line's non-negative integer");
      }
      const auto& ids = j.at("hash_ids");
      if (!ids.is_array() || ids.size() != t[i].hash_ids.size()) {
        Fail("hash_ids is not the line's array");
      }
      for (size_t k = 0; k < ids.size(); ++k) {
        if (!UnsignedEquals(ids[k], t[i].hash_ids[k])) {
          Fail("a hash id is not the line's non-negative integer");
        }
      }
    }
    // 4. Round trip through JSON lines.
    std::string out;
    for (const TraceRequest& r : t) {
      nlohmann::json j = {{"timestamp", r.timestamp_ms},
                          {"input_length", r.input_length},
                          {"output_length", r.output_length},
                          {"hash_ids", r.hash_ids}};
      out += j.dump() + "\n";
    }
    WriteFile(again, out);
    auto back = ReadTrace(again, 0);
    if (!back.ok() || back.value().size() != t.size()) {
      Fail("a written-back trace does not parse");
    }
    for (size_t i = 0; i < t.size(); ++i) {
      if (!Same(back.value()[i], t[i])) Fail("round trip changed a request");
    }
  }

  // 3. A limit reads a prefix.
  if (limit > 0) {
    auto part = ReadTrace(path, limit);
    if (!part.ok() &&
        part.status().code() != kvpool::ErrorCode::INVALID_PARAMS) {
      Fail("a limited parse error that is not INVALID_PARAMS");
    }
    if (full.ok()) {
      if (!part.ok()) Fail("full parse OK, limited parse fails");
      const size_t n = std::min(limit, full.value().size());
      if (part.value().size() != n) Fail("limited parse has the wrong size");
      for (size_t i = 0; i < n; ++i) {
        if (!Same(part.value()[i], full.value()[i])) {
          Fail("limited parse is not a prefix");
        }
      }
    }
  }
  return 0;
}
