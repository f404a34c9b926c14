// Identity of this machine, used to decide whether a segment can be mapped
// directly (same host => shared memory) or must be reached over TCP.
#ifndef KVPOOL_COMMON_HOST_ID_H_
#define KVPOOL_COMMON_HOST_ID_H_

#include <string>

namespace kvpool {

// hostname + kernel boot id + network namespace: two containers sharing a
// hostname but not a kernel (and so not /dev/shm) never look like the same
// host, and neither do two network namespaces of one kernel — they are
// separate hosts to the network (a test's simulated hosts, containers with
// their own network), even where the same /dev/shm is visible to both.
// Processes of one network namespace on one kernel share the id.
const std::string& LocalHostId();
// The same, read again now (LocalHostId keeps the first answer).
std::string ReadHostId();

}  // namespace kvpool

#endif  // KVPOOL_COMMON_HOST_ID_H_
