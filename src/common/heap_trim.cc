#include "common/heap_trim.h"

#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/thread_name.h"

namespace kvpool {

HeapTrimmer::HeapTrimmer(Options options, Counter* trims,
                         Counter* released_bytes)
    : options_(options),
      trims_(trims),
      released_bytes_(released_bytes),
      floor_(NotInUseBytes()) {}

HeapTrimmer::~HeapTrimmer() { Stop(); }

void HeapTrimmer::Start() {
  if (options_.threshold_bytes == 0 || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] {
    SetThreadName("kvpool-heaptrim");
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, options_.interval, [this] { return stop_; })) {
      lock.unlock();
      CheckOnce();
      lock.lock();
    }
  });
}

void HeapTrimmer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t HeapTrimmer::AnonResidentBytes() {
  // statm: size resident shared ... in pages; shared = file-backed and
  // shared memory, so resident - shared is RssAnon.
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0, shared = 0;
  const int n = std::fscanf(f, "%lu %lu %lu", &size, &resident, &shared);
  std::fclose(f);
  if (n != 3 || shared > resident) return 0;
  return uint64_t(resident - shared) * uint64_t(sysconf(_SC_PAGESIZE));
}

int64_t HeapTrimmer::NotInUseBytes() {
  // mallinfo2 walks the arenas' free lists: about 0.1 ms after a storm
  // of refused 100 MB requests (few, large free chunks).
  const struct mallinfo2 m = mallinfo2();
  return int64_t(AnonResidentBytes()) - int64_t(m.uordblks + m.hblkhd);
}

bool HeapTrimmer::CheckOnce() {
  if (options_.threshold_bytes == 0) return false;
  const int64_t threshold = int64_t(options_.threshold_bytes);
  const int64_t not_in_use = NotInUseBytes();
  // What the process keeps however often it trims (partial pages, thread
  // stacks) may shrink too.
  floor_ = std::min(floor_, not_in_use);
  if (not_in_use <= floor_ + threshold) return false;
  const uint64_t before = AnonResidentBytes();
  const auto t0 = std::chrono::steady_clock::now();
  malloc_trim(0);
  const uint64_t after = AnonResidentBytes();
  const int64_t released = before > after ? int64_t(before - after) : 0;
  // A trim that gave back less than half the threshold met memory it
  // cannot give back (pages shared with live allocations): that is the
  // floor now, or every check would trim again for nothing. A productive
  // one keeps the floor: memory freed while it ran (the end of a burst)
  // goes at the next check.
  if (released < threshold / 2) floor_ = NotInUseBytes();
  if (trims_ != nullptr) trims_->Inc();
  if (released_bytes_ != nullptr) released_bytes_->Inc(uint64_t(released));
  spdlog::info(
      "heap trim: gave back {} MiB of freed heap ({} -> {} MiB resident) in "
      "{} ms",
      released >> 20, before >> 20, after >> 20,
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - t0)
          .count());
  return true;
}

}  // namespace kvpool
