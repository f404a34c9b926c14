// Segments that a node in this process created and serves, by file path.
// A client in the same process (a hosting Mooncake-compatible store, an
// engine that is also a node, a LocalCluster) copies through the node's own
// mapping instead of mapping the file a second time: a second mapping of a
// whole segment populates its page tables at the client's first use (about
// 0.25 s per GiB on 4 KiB pages, a stall of the first put or get) and
// doubles the page-table memory. The node publishes its segments here and
// withdraws them before it lets them go; the data plane looks here before
// it maps a file. Thread-safe.
#ifndef KVPOOL_TRANSPORT_LOCAL_SEGMENTS_H_
#define KVPOOL_TRANSPORT_LOCAL_SEGMENTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "transport/shm_segment.h"

namespace kvpool {

// Makes `seg` findable by its path. Holds it weakly: its owner decides its
// lifetime. A later publication under the same path replaces this one.
void PublishLocalSegment(const std::shared_ptr<const ShmSegment>& seg);
// Removes the publication of `seg` (nothing if another segment was
// published under its path since).
void WithdrawLocalSegment(const ShmSegment* seg);
// The published, still-live segment at `path` whose size is `size`, else
// nullptr (the caller then maps the file itself, as it would without this
// registry). The result keeps the mapping alive while the caller holds it.
std::shared_ptr<const ShmSegment> FindLocalSegment(const std::string& path,
                                                   uint64_t size);

// A view (ShmSegment::Open) of another process's segment at `path`,
// mounted as `segment_id`, shared by every client of this process that
// asks: page tables, set up per 2 MiB chunk at its first copy (Prepare,
// ~0.1 ms a chunk here), are then built once per process, not once per
// client (several engines in one process each paid it for all the DRAM
// they touched). Held weakly, as the published segments; keyed by path and
// segment id as a client's own cache is (a remount's new id maps anew).
Result<std::shared_ptr<const ShmSegment>> SharedView(const std::string& path,
                                                     uint64_t segment_id,
                                                     uint64_t size);

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_LOCAL_SEGMENTS_H_
