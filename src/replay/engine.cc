#include "replay/engine.h"

#include <algorithm>

#include "replay/batching_engine.h"
#include "replay/serial_engine.h"

namespace kvpool::replay {

double BusyLog::BusySec(double w0, double w1) const {
  std::lock_guard<std::mutex> lock(mu_);
  double s = 0;
  for (const auto& [a, b] : spans_) {
    const double lo = std::max(a, w0), hi = std::min(b, w1);
    if (hi > lo) s += hi - lo;
  }
  return s;
}

bool ParseEngineKind(const std::string& s, EngineKind* out) {
  if (s == "batching") {
    *out = EngineKind::kBatching;
  } else if (s == "serial") {
    *out = EngineKind::kSerial;
  } else {
    return false;
  }
  return true;
}

const char* EngineKindName(EngineKind k) {
  return k == EngineKind::kSerial ? "serial" : "batching";
}

std::unique_ptr<Engine> MakeEngine(EngineKind kind, EngineConfig config,
                                   Client* client, const EngineModel* model,
                                   Engine::DoneFn done) {
  if (kind == EngineKind::kSerial) {
    return std::make_unique<SerialEngine>(std::move(config), client, model,
                                          std::move(done));
  }
  return std::make_unique<BatchingEngine>(std::move(config), client, model,
                                          std::move(done));
}

}  // namespace kvpool::replay
