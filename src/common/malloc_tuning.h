// Process-wide settings of glibc's malloc for the master
// (docs/master_envelope.md, "Shard-lock holds").
#ifndef KVPOOL_COMMON_MALLOC_TUNING_H_
#define KVPOOL_COMMON_MALLOC_TUNING_H_

namespace kvpool {

// Turns glibc's fastbins off (M_MXFAST = 0), unless the environment sets
// KVPOOL_MALLOC_FASTBINS=1. Why: the master frees one small node per
// object (112 bytes) and a node's death or an eviction frees millions at
// once; with fastbins those pile up unmerged, and the next request of 1 KiB
// or more on that arena merges them all in one go (malloc_consolidate),
// under whatever lock its caller holds: 614 ms of CPU under one shard lock
// after a node holding 7.5M objects died (bench master-envelope, 30M). With
// fastbins off each free merges its chunk at once, a cost spread over the
// frees (no change in fill or put rate this machine could see). Call at
// start, before threads allocate; returns whether the setting took.
bool ConfigureMallocForMaster();

}  // namespace kvpool

#endif  // KVPOOL_COMMON_MALLOC_TUNING_H_
