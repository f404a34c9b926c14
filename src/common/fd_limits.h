// Surviving descriptor exhaustion (issue #41, hole 5).
//
// RaiseOpenFileLimit: the daemons (kvpool-master, kvpool-node,
// kvpool-router) raise their soft RLIMIT_NOFILE to the hard limit at start,
// so a default soft limit of 1024 is not what a flood of connections meets.
//
// GuardAccepts: gRPC 1.51 (Debian 12) stops accepting on a listening socket
// for good after one accept4() fails with EMFILE ("Failed accept4: Too many
// open files"; grpc/grpc#20418, fixed only in later releases by a retry
// timer): new clients then queue in the kernel's backlog until their
// deadline, even once the descriptors are free again. A guarded listener's
// accept4() never returns EMFILE or ENFILE to its caller: this file defines
// accept4() for the process (the executable's definition is the one
// libgrpc's calls reach), and on a guarded port
//  - a connection accepted into one of the last descriptors of the table
//    (at or above the soft limit minus FdReserve()) is closed at once, so
//    the process keeps room for its other files and a client sees its
//    connection closed, not a silent wait;
//  - when the table is full, the connections waiting in the backlog are
//    accepted into a descriptor held in reserve and closed, one after the
//    other, and the caller is told EAGAIN (nothing to accept), so it waits
//    for the next connection instead of giving up the listener.
// Other sockets' accept4() calls pass through unchanged. Meant for
// non-blocking listeners (gRPC's): on a blocking one, shedding waits for a
// connection as accept4() itself would. Thread-safe.
#ifndef KVPOOL_COMMON_FD_LIMITS_H_
#define KVPOOL_COMMON_FD_LIMITS_H_

#include <cstdint>

namespace kvpool {

struct OpenFileLimit {
  uint64_t soft_before = 0;
  uint64_t soft = 0;  // after raising
  uint64_t hard = 0;
};

// Raises the soft limit on open files to the hard limit and logs both
// (RLIM_INFINITY shows as UINT64_MAX). Never lowers it; on failure logs a
// warning and leaves it as it was.
OpenFileLimit RaiseOpenFileLimit();

// Descriptors a guarded listener leaves free for everything else: an eighth
// of the soft limit, at least 16, at most 256.
uint64_t FdReserve(uint64_t soft_limit);

// From now on accept4() on the listening socket bound to TCP `port` is
// guarded (above). At most 8 ports at once; false when the table is full.
bool GuardAccepts(int port);
void UnguardAccepts(int port);

struct AcceptGuardStats {
  // Connections closed right after accept because the table was nearly full.
  uint64_t shed_near_limit = 0;
  // Connections taken from the backlog with the reserve descriptor and
  // closed because the table was full (EMFILE / ENFILE).
  uint64_t shed_table_full = 0;
};
AcceptGuardStats GetAcceptGuardStats();

}  // namespace kvpool

#endif  // KVPOOL_COMMON_FD_LIMITS_H_
