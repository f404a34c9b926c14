#include "scale_sim/cost_model.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvpool::scale_sim {

namespace {

constexpr const char* kSchema = "kvpool-scale-sim-costs/1";

Status Bad(const std::string& what) {
  return Status(ErrorCode::INVALID_PARAMS, "cost file: " + what);
}

// j[name] as a number into *out; a missing field is an error unless
// `optional` (then *out keeps its default).
Status ReadNumber(const nlohmann::json& j, const char* name, double* out,
                  bool optional = false) {
  if (!j.contains(name)) {
    return optional ? Status::OK() : Bad(fmt::format("missing \"{}\"", name));
  }
  if (!j[name].is_number())
    return Bad(fmt::format("\"{}\" is not a number", name));
  *out = j[name].get<double>();
  return Status::OK();
}

Status ReadOp(const nlohmann::json& ops, Op op, OpCost* out) {
  const char* name = OpName(op);
  if (!ops.contains(name) || !ops[name].is_object()) {
    return Bad(fmt::format("missing \"ops.{}\"", name));
  }
  const auto& j = ops[name];
  double calls = out->calls;
  if (auto s = ReadNumber(j, "calls", &calls, true); !s.ok()) return s;
  if (calls < 1 || calls != std::floor(calls) || calls > 16) {
    return Bad(fmt::format("ops.{}.calls must be an integer in [1, 16]", name));
  }
  out->calls = static_cast<int>(calls);
  if (auto s = ReadNumber(j, "call_us", &out->call_us); !s.ok()) return s;
  return ReadNumber(j, "key_us", &out->key_us);
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kLookup:
      return "lookup";
    case Op::kGet:
      return "get";
    case Op::kPut:
      return "put";
  }
  return "?";
}

Status CostModel::Validate() const {
  if (service_threads < 1 || service_threads > 4096) {
    return Bad("service_threads must be in [1, 4096]");
  }
  for (int i = 0; i < kOpCount; ++i) {
    const OpCost& c = ops[i];
    if (!(c.call_us >= 0) || !(c.key_us >= 0) || c.call_us + c.key_us <= 0) {
      return Bad(
          fmt::format("ops.{}: call_us and key_us must be >= 0, "
                      "not both 0",
                      OpName(static_cast<Op>(i))));
    }
  }
  if (!(bytes_per_object > 0)) return Bad("bytes_per_object must be > 0");
  if (!(heartbeat_us >= 0)) return Bad("heartbeat_us must be >= 0");
  if (!(heartbeat_interval_ms > 0))
    return Bad("heartbeat_interval_ms must be > 0");
  if (!(failover_detect_s >= 0) || !(restart_base_s >= 0)) {
    return Bad("failover_detect_s and restart_base_s must be >= 0");
  }
  if (!(reregister_objects_per_s > 0)) {
    return Bad("reregister_objects_per_s must be > 0");
  }
  return Status::OK();
}

Result<CostModel> ParseCostModel(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  if (!j.contains("schema") || j["schema"] != kSchema) {
    return Bad(fmt::format("\"schema\" must be \"{}\"", kSchema));
  }
  CostModel m;
  double threads = 0;
  if (auto s = ReadNumber(j, "service_threads", &threads); !s.ok()) return s;
  if (threads != std::floor(threads)) return Bad("service_threads: an integer");
  m.service_threads = static_cast<int>(threads);
  if (!j.contains("ops") || !j["ops"].is_object())
    return Bad("missing \"ops\"");
  for (int i = 0; i < kOpCount; ++i) {
    if (auto s = ReadOp(j["ops"], static_cast<Op>(i), &m.ops[i]); !s.ok()) {
      return s;
    }
  }
  for (auto [name, field] : {
           std::pair{"bytes_per_object", &m.bytes_per_object},
           std::pair{"heartbeat_us", &m.heartbeat_us},
           std::pair{"heartbeat_interval_ms", &m.heartbeat_interval_ms},
           std::pair{"failover_detect_s", &m.failover_detect_s},
           std::pair{"restart_base_s", &m.restart_base_s},
           std::pair{"reregister_objects_per_s", &m.reregister_objects_per_s},
       }) {
    if (auto s = ReadNumber(j, name, field); !s.ok()) return s;
  }
  if (auto s = m.Validate(); !s.ok()) return s;
  return m;
}

Result<CostModel> LoadCostModel(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status(ErrorCode::FILE_NOT_FOUND,
                  "cannot open the cost file " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = ParseCostModel(ss.str());
  if (!m.ok()) {
    return Status(m.code(), path + ": " + m.status().message());
  }
  return m;
}

}  // namespace kvpool::scale_sim
