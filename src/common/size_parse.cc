#include "common/size_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace kvpool {

Result<uint64_t> ParseSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
    ++i;
  if (i == 0)
    return Status(ErrorCode::INVALID_PARAMS, "not a size: '" + text + "'");
  // Any number of digits (leading zeros, or the 20 of values from 1e19 up,
  // which FormatSize writes); only a value past 64 bits is too large.
  uint64_t n = 0;
  if (std::from_chars(text.data(), text.data() + i, n).ec != std::errc())
    return Status(ErrorCode::INVALID_PARAMS, "size too large: " + text);
  std::string suffix = text.substr(i);
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    shift = 40;
  } else {
    return Status(ErrorCode::INVALID_PARAMS,
                  "unknown size suffix in '" + text + "'");
  }
  if (shift > 0 && n > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return Status(ErrorCode::INVALID_PARAMS, "size overflows: " + text);
  }
  return n << shift;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"TiB", "GiB", "MiB", "KiB"};
  static const int kShifts[] = {40, 30, 20, 10};
  for (int i = 0; i < 4; ++i) {
    uint64_t unit = uint64_t{1} << kShifts[i];
    if (bytes >= unit && bytes % unit == 0) {
      return std::to_string(bytes / unit) + kUnits[i];
    }
  }
  return std::to_string(bytes);
}

}  // namespace kvpool
