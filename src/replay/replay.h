// `kvpool replay`: the whole A/B on a request trace. Reads the trace,
// calibrates the engine model on this machine, runs every arm on a fresh
// LocalCluster (fill -> overflow -> settle -> measure), writes the JSON and
// Markdown report and the plots, and prints the summary table.
#ifndef KVPOOL_REPLAY_REPLAY_H_
#define KVPOOL_REPLAY_REPLAY_H_

#include <nlohmann/json.hpp>

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

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPLAY_H_
