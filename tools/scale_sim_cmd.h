// `kvpool scale-sim`: the simulation of the metadata plane past one master
// (src/scale_sim, docs/scale.md): a sweep over shard counts, request rates
// and routings, fed by a request trace and a per-operation cost file;
// writes JSON, markdown and SVG.
#ifndef KVPOOL_TOOLS_SCALE_SIM_CMD_H_
#define KVPOOL_TOOLS_SCALE_SIM_CMD_H_

#include <CLI/CLI.hpp>
#include <memory>

namespace kvpool {

class ScaleSimCommand {
 public:
  virtual ~ScaleSimCommand() = default;
  // True when the command line chose `scale-sim`.
  virtual bool chosen() const = 0;
  // Runs it; the process exit code (2 for a bad command line or input, 1
  // for an output that cannot be written).
  virtual int Run() = 0;
};

// Adds the `scale-sim` subcommand and its flags to `app`.
std::unique_ptr<ScaleSimCommand> AddScaleSimCommand(CLI::App& app);

}  // namespace kvpool

#endif  // KVPOOL_TOOLS_SCALE_SIM_CMD_H_
