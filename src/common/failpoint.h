// Named failpoints for fault-injection tests (after FoundationDB's and
// LevelDB's fault injection): a point in the code where a test can make the
// process die or stall exactly there. Off unless KVPOOL_FAILPOINTS is set
// when the process starts (or a test arms one in process), and then a
// single relaxed atomic load per pass when no point is armed.
//
//   KVPOOL_FAILPOINTS="master.put_end.after_commit=crash@3,node.x=pause:2000"
//
// arms `master.put_end.after_commit` to SIGKILL the process on its 3rd pass
// and `node.x` to stall the calling thread 2000 ms on its 1st; a trailing
// `+` (`pause:300@1+`) acts on every pass from then on (a slow disk). Every
// name used in the code is listed in kFailpointNames, so a test can iterate
// them.
#ifndef KVPOOL_COMMON_FAILPOINT_H_
#define KVPOOL_COMMON_FAILPOINT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvpool/status.h"

namespace kvpool {

inline constexpr const char* kFailpointNames[] = {
    "master.put_end.after_commit",    // value complete, reply not sent
    "master.remove.after_erase",      // erased, holders not yet waited for
    "master.offload_ack.before",      // a holder's copy arrived, not recorded
    "master.register_memory.midway",  // a directory batch half taken back
    "master.promotion_call.before",   // a holder's alloc/notify, not yet run
    "node.directory.before_ack",      // events applied, not acknowledged
    "node.offload.after_write",       // SSD record written, master not told
    "node.promotion.after_read",      // promoted bytes read, not written
    "node.promotion.after_write",     // promoted bytes written, not notified
    "storage.write",                  // before an SSD write is submitted
    "storage.read",                   // before an SSD read is submitted
    "node.get_read.during",           // a get's SSD read, holding the disk
    "client.put.after_start",         // a put's ranges granted, not written
    "client.prefetch.before_job",     // a prefetch job taken, not yet run
};

namespace failpoint_internal {
extern std::atomic<bool> any_armed;
void Hit(std::string_view name);
}  // namespace failpoint_internal

// Arms from a spec as in KVPOOL_FAILPOINTS; INVALID_PARAMS for a bad spec
// or a name not in kFailpointNames.
Status ArmFailpoints(const std::string& spec);
void DisarmFailpoints();
// Passes of `name` since it was armed (0 if never armed).
uint64_t FailpointPasses(std::string_view name);

#define KVPOOL_FAILPOINT(name)                        \
  do {                                                \
    if (::kvpool::failpoint_internal::any_armed.load( \
            std::memory_order_relaxed))               \
      ::kvpool::failpoint_internal::Hit(name);        \
  } while (0)

}  // namespace kvpool

#endif  // KVPOOL_COMMON_FAILPOINT_H_
