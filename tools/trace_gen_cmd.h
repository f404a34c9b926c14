// `kvpool trace-gen`: writes a synthetic request trace for `kvpool replay`
// from a preset of src/replay/trace_gen.h, with per-parameter overrides.
#ifndef KVPOOL_TOOLS_TRACE_GEN_CMD_H_
#define KVPOOL_TOOLS_TRACE_GEN_CMD_H_

#include <CLI/CLI.hpp>
#include <memory>

namespace kvpool {

class TraceGenCommand {
 public:
  virtual ~TraceGenCommand() = default;
  // True when the command line chose `trace-gen`.
  virtual bool chosen() const = 0;
  // Runs it; the process exit code (2 for a bad command line, 1 for a file
  // that cannot be written).
  virtual int Run() = 0;
};

// Adds the `trace-gen` subcommand and its flags to `app`.
std::unique_ptr<TraceGenCommand> AddTraceGenCommand(CLI::App& app);

}  // namespace kvpool

#endif  // KVPOOL_TOOLS_TRACE_GEN_CMD_H_
