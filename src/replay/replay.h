// `kvpool replay`: the whole A/B on a request trace. Reads the trace,
// calibrates the engine model on this machine, runs every arm on a fresh
// LocalCluster (fill -> overflow -> settle -> measure), writes the JSON and
// Markdown report and the plots, and prints the summary table.
#ifndef KVPOOL_REPLAY_REPLAY_H_
#define KVPOOL_REPLAY_REPLAY_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvpool/status.h"
#include "replay/options.h"

namespace kvpool::replay {

struct ReplayOutput {
  nlohmann::json report;
  std::string json_path, markdown_path;
  std::vector<std::string> plots;  // written plot files
  std::string plot_note;           // why there are none, if so
};

// Runs the replay and writes its files; the report is also returned.
Result<ReplayOutput> RunReplay(const ReplayOptions& options);

// Writes `report` as RunReplay does: the JSON (options.json_path, default
// <out_dir>/replay.json), the Markdown and, with options.plots, the plots.
Result<ReplayOutput> WriteReplayOutput(const ReplayOptions& options,
                                       nlohmann::json report);

// Renders an earlier run's JSON report again with this build's report
// (sections added since it was written are filled from its data), without
// running anything: FILE_NOT_FOUND, or INVALID_PARAMS for a file that is not
// a replay report.
Result<ReplayOutput> RerenderReplay(const ReplayOptions& options,
                                    const std::string& json_path);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPLAY_H_
