// How many of the blocks that were SSD-only when routed any prefetch could
// have had in DRAM by their get: an upper bound that depends only on when
// blocks were routed, when they were read and how fast a holder's disk
// reads one block, not on the prefetch path being measured. An arm's DRAM
// share is judged against it: a share far below the bound is the prefetch
// path's loss; a bound below a target means no prefetch path reaches that
// target on this trace, load and disk.
#ifndef KVPOOL_REPLAY_REPORT_BOUND_H_
#define KVPOOL_REPLAY_REPORT_BOUND_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "replay/engine.h"
#include "replay/trace.h"

namespace kvpool::replay {

struct ReachBound {
  uint64_t blocks = 0;     // SSD-only when their request was routed
  uint64_t reachable = 0;  // ... that could have been in DRAM by the get
  double Share() const {
    return blocks ? double(reachable) / double(blocks) : 0.0;
  }
};

// The bound's assumptions, each in prefetch's favour:
// - A block's promotion may start at the first route that saw it SSD-only
//   since it was last read or last seen elsewhere than SSD only (so an
//   earlier request's trigger counts for a later request).
// - Each request has its holders' disks to itself: no other request's gets
//   or promotions, no offload writes, no master round trips; a holder reads
//   the request's blocks back to back, each in `block_read_s`, in the order
//   they were triggered (for equal reads and one deadline, no order lands
//   more before it).
// - A block is reachable when its read ends by its request's get start.
// `records` are one arm's requests (any order; unrouted ones are skipped);
// `trace` is indexed by RequestRecord::index. Blocks whose index falls
// outside the trace are counted, not reachable.
ReachBound ReachableBeforeGet(const std::vector<RequestRecord>& records,
                              const std::vector<TraceRequest>& trace,
                              double block_read_s);

// A reference for the same blocks when requests do share the disks, not a
// bound: every SSD-only block is read once, from its trigger (as above),
// and the gets' other disk reads from their get's start; each disk (one
// for every holder when `one_disk`: nodes of one machine, as in the
// replay's clusters; else one per holder) reads them one at a time, each
// in `block_read_s`, in the order they were asked for. A block is
// reachable when its read ends by its request's get start. Still in
// prefetch's favour: a get joins the promotion of a block it reads, so no
// block is read twice, and nothing else (offload writes, round trips)
// takes the disk. Not an upper bound: an order other than arrival (the
// reads that can still land first) can land more.
ReachBound ReachableSharingDisks(const std::vector<RequestRecord>& records,
                                 const std::vector<TraceRequest>& trace,
                                 double block_read_s, bool one_disk);

// The report's `reachable_bound`: the bound at the calibrated read time
// per block and with a disk ten times faster (which of window and disk
// bounds the share), and at `given_ms` per block when that is > 0 (the
// disk's sustained rate), with ReachableSharingDisks at `given_ms`
// (`share_sharing_one_disk`, `share_sharing_holder_disks`). Empty when
// neither read time is known.
nlohmann::json ReachBoundJson(const std::vector<RequestRecord>& records,
                              const std::vector<TraceRequest>& trace,
                              double calibrated_ms, double given_ms);
// Its Markdown cell: "share / 10x share[ / given share at X ms (shared in
// route order: one disk, a disk per holder)]", or "-"
// for a report from before the bound.
std::string ReachBoundCell(const nlohmann::json& bound);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_BOUND_H_
