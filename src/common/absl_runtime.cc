#include "common/absl_runtime.h"

#include <absl/synchronization/mutex.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace kvpool {

void ConfigureAbslRuntime() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* keep = std::getenv("KVPOOL_ABSL_DEADLOCK_DETECTION");
    if (keep != nullptr && std::strcmp(keep, "1") == 0) return;
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
}

}  // namespace kvpool
