#include "node/segment_populator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace kvpool {

SegmentPopulator::SegmentPopulator(
    std::vector<std::shared_ptr<const ShmSegment>> segments,
    std::function<void(uint64_t)> before_chunk)
    : segments_(std::move(segments)), before_chunk_(std::move(before_chunk)) {
  for (const auto& s : segments_) {
    if (s) total_ += s->size();
  }
}

SegmentPopulator::~SegmentPopulator() { Stop(); }

void SegmentPopulator::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

std::unique_ptr<SegmentPopulator> SegmentPopulator::Launch(
    std::vector<std::shared_ptr<const ShmSegment>> segments,
    std::function<void(uint64_t)> before_chunk) {
  auto p = std::make_unique<SegmentPopulator>(std::move(segments),
                                              std::move(before_chunk));
  p->Start();
  return p;
}

void SegmentPopulator::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

bool SegmentPopulator::WaitDone(int64_t timeout_ms) const {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(&mu_);
  while (!finished_) {
    if (!cv_.WaitUntil(&mu_, deadline)) break;
  }
  return done();
}

void SegmentPopulator::Run() {
  // The process's own priority, not a lower one: zeroing a page holds that
  // page's lock and the process's mmap lock (read), so a put faulting on
  // it, or any thread mapping memory, waits for this thread; at nice 19 on
  // a busy host such a wait lasted a scheduler's round (a 2 GiB segment on
  // 2 MiB pages, 4 MiB puts from Python just after start: p50 11.0 ms in 1
  // run of 3 at nice 19, 1.39-1.47 ms in 3 of 3 at nice 0, 1.3 ms once
  // populated). The zeroing is work a first put would do anyway.
  const auto t0 = std::chrono::steady_clock::now();
  bool complete = true;
  for (const auto& seg : segments_) {
    if (!seg) continue;
    // From the end down: the allocator hands out a fresh segment from its
    // start, so the first puts and this thread meet once, in the middle,
    // rather than all the way (a put faulting on a page being zeroed waits
    // for it).
    for (uint64_t end = seg->size(); end > 0 && complete;) {
      if (stop_.load(std::memory_order_relaxed)) {
        complete = false;
        break;
      }
      if (before_chunk_) before_chunk_(populated_.load());
      const uint64_t at = (end - 1) / kChunk * kChunk;
      const uint64_t len = end - at;
      if (Status s = seg->Populate(at, len); !s.ok()) {
        // Only a cost: the pages left fault in at their first put.
        spdlog::warn("segment population stopped: {}", s.ToString());
        complete = false;
        break;
      }
      populated_.fetch_add(len, std::memory_order_relaxed);
      end = at;
    }
  }
  seconds_.store(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count());
  done_.store(complete, std::memory_order_release);
  if (complete) {
    spdlog::info("{} MiB of segment DRAM populated in {:.2f} s", total_ >> 20,
                 seconds_.load());
  }
  MutexLock lock(&mu_);
  finished_ = true;
  cv_.SignalAll();
}

}  // namespace kvpool
