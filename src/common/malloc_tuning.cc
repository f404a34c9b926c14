#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace kvpool {

bool ConfigureMallocForMaster() {
  const char* keep = std::getenv("KVPOOL_MALLOC_FASTBINS");
  if (keep != nullptr && std::strcmp(keep, "1") == 0) return false;
  return mallopt(M_MXFAST, 0) == 1;
}

}  // namespace kvpool
