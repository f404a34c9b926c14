// Small helpers of the replay's JSON report: rounding for readable numbers,
// a number read from an object that may lack it, and a share as a percent.
#ifndef KVPOOL_REPLAY_JSON_UTIL_H_
#define KVPOOL_REPLAY_JSON_UTIL_H_

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace kvpool::replay {

inline double Round(double v, int digits = 3) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

// j[k] as a double; 0 when absent or not a number.
inline double Num(const nlohmann::json& j, const char* k) {
  return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0;
}

// 0.123 -> "12.3%".
inline std::string Pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_JSON_UTIL_H_
