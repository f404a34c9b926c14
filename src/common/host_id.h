// Identity of this machine, used to decide whether a segment can be mapped
// directly (same host => shared memory) or must be reached over TCP.
#ifndef KVPOOL_COMMON_HOST_ID_H_
#define KVPOOL_COMMON_HOST_ID_H_

#include <string>

namespace kvpool {

// hostname + kernel boot id: two containers sharing a hostname but not a
// kernel (and so not /dev/shm) never look like the same host.
const std::string& LocalHostId();

}  // namespace kvpool

#endif  // KVPOOL_COMMON_HOST_ID_H_
