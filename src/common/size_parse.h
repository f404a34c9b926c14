// Byte sizes as operators write them: "64MiB", "1GiB", "4096", "512KiB".
#ifndef KVPOOL_COMMON_SIZE_PARSE_H_
#define KVPOOL_COMMON_SIZE_PARSE_H_

#include <cstdint>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

// Accepts a decimal number with an optional suffix B, K/KB/KiB, M/MB/MiB,
// G/GB/GiB, T/TB/TiB (all powers of 1024, case-insensitive). Anything else
// is INVALID_PARAMS.
Result<uint64_t> ParseSize(const std::string& text);
// 67108864 -> "64MiB"; exact multiples only, otherwise bytes.
std::string FormatSize(uint64_t bytes);

}  // namespace kvpool

#endif  // KVPOOL_COMMON_SIZE_PARSE_H_
