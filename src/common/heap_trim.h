// Gives the kernel back the heap memory glibc keeps after a burst of large
// requests (issue #41, hole 4).
//
// A refused 100 MB request is still received and parsed by gRPC (up to the
// max receive message size), on whichever server thread took it: a million
// small allocations in that thread's malloc arena, all freed at the refusal.
// glibc keeps freed memory in its arenas and returns it to the kernel only
// from the top of each heap, so four callers' oversized batches left the
// master's RssAnon at 1 GiB for good (11 MiB before). malloc_trim(0) gives
// back every whole free page of every arena (65 ms for 1.3 GiB here).
//
// A thread checks once per `interval`: when the process's resident
// anonymous memory exceeds what malloc has in use (mallinfo2) by more than
// `threshold_bytes` over the least it has exceeded it by (at start, or
// after a trim that could give no more back), it trims. Memory the process
// really uses never triggers a trim, however much it grows; memory freed
// while a trim runs (the end of a burst) goes at the next check.
// Thread-safe; Stop (or the destructor) joins the thread.
#ifndef KVPOOL_COMMON_HEAP_TRIM_H_
#define KVPOOL_COMMON_HEAP_TRIM_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "common/metrics.h"

namespace kvpool {

class HeapTrimmer {
 public:
  struct Options {
    uint64_t threshold_bytes = 32 << 20;  // 0: never trim
    std::chrono::milliseconds interval{1000};
  };
  // `trims` and `released_bytes` (may be null) count the trims and the
  // resident bytes they gave back.
  HeapTrimmer(Options options, Counter* trims, Counter* released_bytes);
  ~HeapTrimmer();
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  void Start();
  void Stop();
  // One check: trims when the free resident memory is over the threshold;
  // returns whether it did.
  bool CheckOnce();

  // Resident anonymous memory of this process (RSS less file-backed and
  // shared pages), bytes.
  static uint64_t AnonResidentBytes();

 private:
  // Resident anonymous bytes that are not malloc's allocations in use.
  static int64_t NotInUseBytes();

  const Options options_;
  Counter* const trims_;
  Counter* const released_bytes_;
  // The least resident memory not in use seen at a check or after a trim
  // that could give no more back; only touched by CheckOnce's caller.
  int64_t floor_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_HEAP_TRIM_H_
