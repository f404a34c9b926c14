// Request traces in the format of shared/traces/ (Mooncake FAST'25): one JSON
// object per line with the arrival time in ms, prompt and output lengths, and
// the prompt's 512-token blocks as hash ids (equal ids = reusable KV blocks).
#ifndef KVPOOL_REPLAY_TRACE_H_
#define KVPOOL_REPLAY_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/status.h"

namespace kvpool::replay {

inline constexpr uint64_t kTraceBlockTokens = 512;

struct TraceRequest {
  double timestamp_ms = 0;
  uint64_t input_length = 0;   // prompt tokens
  uint64_t output_length = 0;  // generated tokens
  std::vector<uint64_t> hash_ids;
};

// Reads at most `limit` requests (0 = all). Lines that are empty are
// skipped; a malformed line is an INVALID_PARAMS naming its line number, so
// a truncated or foreign file never replays silently as a shorter trace.
Result<std::vector<TraceRequest>> ReadTrace(const std::string& path,
                                            size_t limit = 0);

// The store key of one block (one KV-cache block per hash id).
std::string BlockKey(uint64_t hash_id);

// Figures of a trace (or a slice of one), as the trace README states them.
struct TraceSummary {
  size_t requests = 0;
  double span_ms = 0;
  size_t distinct_blocks = 0;
  size_t block_refs = 0;
  size_t reused_refs = 0;  // references to a block seen before in the slice
  double mean_input_tokens = 0;
  double mean_output_tokens = 0;
  size_t max_blocks = 0;  // blocks of the longest prompt
};
TraceSummary Summarize(const std::vector<TraceRequest>& trace, size_t begin,
                       size_t end);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_TRACE_H_
