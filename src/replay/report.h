// The replay's results: one JSON document (everything, raw series included)
// and the Markdown report and console table rendered from it, so the three
// can never disagree.
#ifndef KVPOOL_REPLAY_REPORT_H_
#define KVPOOL_REPLAY_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "replay/arm.h"
#include "replay/calibrate.h"
#include "replay/engine_model.h"
#include "replay/options.h"

namespace kvpool::replay {

struct ReportInput {
  const ReplayOptions* options = nullptr;
  const ReplayPlan* plan = nullptr;
  const Calibration* calibration = nullptr;
  const EngineModel* model = nullptr;
  double estimated_utilisation = 0;  // of the off arm, from EstimateLoad
  std::string time_scale_source;     // given, auto or default
  double estimated_gpu_busy = 0;     // batching: of the off arm, simulated
  double estimated_disk_busy = 0;    // ... of the disk
  // auto sizing: "gpu", "disk" or "busiest engine"
  std::string load_bound;
  std::vector<double> estimated_gpu_busy_per_engine;  // simulated off arm
  std::string disk_cap_note;          // what the run's disk cap was
  uint64_t disk_cap_bytes_per_s = 0;  // applied; 0 = none
  double min_step_ms = 0;             // the step floor, when capped
  const std::vector<ArmResult>* arms = nullptr;
};

nlohmann::json BuildReport(const ReportInput& in);

// Per-arm summary rows of `report` as a fixed-width table (what the command
// prints).
std::string RenderTable(const nlohmann::json& report);
std::string RenderMarkdown(const nlohmann::json& report);

// Percentiles (nearest rank), mean and max of `v`.
nlohmann::json Distribution(std::vector<double> v);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_H_
