// Process-wide settings of the Abseil runtime that gRPC runs on.
#ifndef KVPOOL_COMMON_ABSL_RUNTIME_H_
#define KVPOOL_COMMON_ABSL_RUNTIME_H_

namespace kvpool {

// Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock
// detection on: every lock gRPC takes updates a process-wide lock-order
// graph under a global lock, and every RPC takes dozens
// (docs/configuration.md, "Abseil deadlock detection", has what it costs).
// Release builds of Abseil elsewhere have it off. kvpool's processes and
// its Python module call this at start: it turns detection off unless the
// environment sets KVPOOL_ABSL_DEADLOCK_DETECTION=1. Test binaries do not
// call it, so lock-order cycles inside gRPC still show there. Call it
// before the first RPC; later calls change nothing.
void ConfigureAbslRuntime();

}  // namespace kvpool

#endif  // KVPOOL_COMMON_ABSL_RUNTIME_H_
