#include "replay/trace.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

namespace kvpool::replay {

Result<std::vector<TraceRequest>> ReadTrace(const std::string& path,
                                            size_t limit) {
  std::ifstream in(path);
  if (!in) return Status(ErrorCode::FILE_NOT_FOUND, path);
  std::vector<TraceRequest> out;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    TraceRequest r;
    try {
      auto j = nlohmann::json::parse(line);
      // nlohmann's get<uint64_t> wraps a negative number and truncates a
      // fraction (and takes true as 1): a foreign value must be an error,
      // not a count of 2^64 - 512 tokens.
      auto count = [](const nlohmann::json& v, const char* what) {
        if (!v.is_number_unsigned()) {
          throw std::invalid_argument(std::string(what) +
                                      " must be a non-negative integer");
        }
        return v.get<uint64_t>();
      };
      const auto& ts = j.at("timestamp");
      if (!ts.is_number()) {
        throw std::invalid_argument("timestamp must be a number");
      }
      r.timestamp_ms = ts.get<double>();
      r.input_length = count(j.at("input_length"), "input_length");
      r.output_length = count(j.at("output_length"), "output_length");
      const auto& ids = j.at("hash_ids");
      if (!ids.is_array()) {
        throw std::invalid_argument("hash_ids must be an array");
      }
      for (const auto& id : ids) r.hash_ids.push_back(count(id, "hash id"));
    } catch (const std::exception& e) {
      return Status(ErrorCode::INVALID_PARAMS,
                    fmt::format("{}:{}: {}", path, line_no, e.what()));
    }
    if (!out.empty() && r.timestamp_ms < out.back().timestamp_ms) {
      return Status(
          ErrorCode::INVALID_PARAMS,
          fmt::format("{}:{}: timestamps must not decrease", path, line_no));
    }
    out.push_back(std::move(r));
    if (limit > 0 && out.size() >= limit) break;
  }
  return out;
}

std::string BlockKey(uint64_t hash_id) {
  return fmt::format("blk-{}", hash_id);
}

TraceSummary Summarize(const std::vector<TraceRequest>& trace, size_t begin,
                       size_t end) {
  TraceSummary s;
  end = std::min(end, trace.size());
  if (begin >= end) return s;
  std::unordered_set<uint64_t> seen;
  double in = 0, out = 0;
  for (size_t i = begin; i < end; ++i) {
    const auto& r = trace[i];
    for (uint64_t h : r.hash_ids) s.reused_refs += !seen.insert(h).second;
    s.block_refs += r.hash_ids.size();
    s.max_blocks = std::max(s.max_blocks, r.hash_ids.size());
    in += double(r.input_length);
    out += double(r.output_length);
  }
  s.requests = end - begin;
  s.span_ms = trace[end - 1].timestamp_ms - trace[begin].timestamp_ms;
  s.distinct_blocks = seen.size();
  s.mean_input_tokens = in / double(s.requests);
  s.mean_output_tokens = out / double(s.requests);
  return s;
}

}  // namespace kvpool::replay
