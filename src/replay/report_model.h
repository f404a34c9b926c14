// The report's engine-model section: the modelled hardware, how it was
// carried over to this machine (measured reads, or the disk cap and step
// floor), and the load sizing's estimates; JSON and Markdown.
#ifndef KVPOOL_REPLAY_REPORT_MODEL_H_
#define KVPOOL_REPLAY_REPORT_MODEL_H_

#include <nlohmann/json.hpp>
#include <string>

#include "replay/report.h"

namespace kvpool::replay {

// The report's "engine_model" object.
nlohmann::json EngineModelJson(const ReportInput& in);
// Its Markdown section, from a whole report (setup and calibration too).
std::string RenderEngineModelMarkdown(const nlohmann::json& report);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_MODEL_H_
