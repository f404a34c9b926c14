// Populates a node's DRAM segments in the background (NodeConfig::
// segment_prefault), so a put into DRAM nobody has written yet costs what a
// put into written DRAM costs.
//
// A segment's file is allocated at Create (fallocate), but tmpfs zeroes a
// page only at its first access: without population the first put into
// every 4 KiB pays a page fault and a zeroing on its critical path, in the
// node (TCP) or the client (shared memory). Populating at Create
// (MAP_POPULATE) blocked the node's start ~0.3-0.4 s per GiB before it
// could mount; this runs after Create instead, a chunk at a time, while the
// node mounts and serves. A put into a part not reached yet just faults in
// its pages as it would without population; Populate changes no byte, so
// puts and population never conflict on bytes. They can on time: a put
// faulting on a page this thread is zeroing waits for it, so population
// runs from each segment's end, away from where the allocator starts.
// Thread-safe.
#ifndef KVPOOL_NODE_SEGMENT_POPULATOR_H_
#define KVPOOL_NODE_SEGMENT_POPULATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "transport/shm_segment.h"

namespace kvpool {

class SegmentPopulator {
 public:
  // 256 KiB per madvise: the call holds the process's mmap lock, and a
  // thread that maps memory meanwhile (a gRPC thread's stack, malloc) and
  // every fault queued behind it wait for the chunk to end. 8 GiB segment,
  // mount / first put: 64 MiB chunks 1.7 s / 0.5 s, 2 MiB 0.8 s / 45-70 ms,
  // 256 KiB 0.8 s / 36-43 ms (0.7 s / 3-7 ms with no population).
  static constexpr uint64_t kChunk = 256ull << 10;

  // `before_chunk` (tests): called before each chunk is populated, with the
  // bytes done so far; it may block to hold population where a test wants.
  explicit SegmentPopulator(
      std::vector<std::shared_ptr<const ShmSegment>> segments,
      std::function<void(uint64_t)> before_chunk = nullptr);
  ~SegmentPopulator();
  SegmentPopulator(const SegmentPopulator&) = delete;
  SegmentPopulator& operator=(const SegmentPopulator&) = delete;

  // Starts the thread; returns at once.
  void Start();
  // Constructs and Starts one.
  static std::unique_ptr<SegmentPopulator> Launch(
      std::vector<std::shared_ptr<const ShmSegment>> segments,
      std::function<void(uint64_t)> before_chunk = nullptr);
  // Ends population early (what is done stays done) and joins the thread.
  void Stop();
  bool stopping() const { return stop_.load(); }
  // Whether every segment is populated (false after an early Stop).
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits until done() or the timeout; returns done().
  bool WaitDone(int64_t timeout_ms) const;
  uint64_t populated_bytes() const {
    return populated_.load(std::memory_order_relaxed);
  }
  uint64_t total_bytes() const { return total_; }
  // Seconds the population took (0 until done).
  double seconds() const { return seconds_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const std::vector<std::shared_ptr<const ShmSegment>> segments_;
  const std::function<void(uint64_t)> before_chunk_;
  uint64_t total_ = 0;
  std::atomic<uint64_t> populated_{0};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  std::atomic<double> seconds_{0};
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the thread has returned
  std::thread thread_;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_SEGMENT_POPULATOR_H_
