// `kvpool replay`: the prefetch A/B on a request trace (src/replay). Kept out
// of kvpool_cli.cc so the command's flags live next to nothing else.
#ifndef KVPOOL_TOOLS_REPLAY_CMD_H_
#define KVPOOL_TOOLS_REPLAY_CMD_H_

#include <CLI/CLI.hpp>
#include <memory>

namespace kvpool {

class ReplayCommand {
 public:
  virtual ~ReplayCommand() = default;
  // True when the command line chose `replay`.
  virtual bool chosen() const = 0;
  // Runs it; the process exit code.
  virtual int Run() = 0;
};

// Adds the `replay` subcommand and its flags to `app`.
std::unique_ptr<ReplayCommand> AddReplayCommand(CLI::App& app);

}  // namespace kvpool

#endif  // KVPOOL_TOOLS_REPLAY_CMD_H_
