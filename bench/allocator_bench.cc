// Micro-benchmarks of SegmentAllocator (the master's per-segment offset
// allocator). Only offsets are managed, so a large virtual capacity costs
// nothing but metadata.
//
// BM_AllocFree: steady-state churn. The segment is pre-filled with
// kLiveAllocations ranges, then each iteration frees a random live range and
// allocates a new one, so the free lists are fragmented the way a long-running
// store's are. BM_AllocFreePair: allocate and immediately free (the best
// case: always the same block, split and re-coalesced).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "master/segment_allocator.h"

namespace kvpool {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr size_t kLiveAllocations = 100000;
constexpr size_t kPrecomputed = 1 << 16;  // random inputs, reused cyclically

enum SizeMix : int64_t {
  kFixed64KiB = 0,  // uniform KV blocks: every request the same size
  kSmall = 1,       // 64 B .. 4 KiB, uniform
  kKvMixed = 2,     // 16 KiB .. 4 MiB, log-uniform (typical KV objects)
  kWide = 3,        // 64 B .. 64 MiB, log-uniform (worst case for bins)
};

const char* MixName(int64_t mix) {
  switch (mix) {
    case kFixed64KiB:
      return "fixed_64KiB";
    case kSmall:
      return "small_64B-4KiB";
    case kKvMixed:
      return "kv_16KiB-4MiB";
    case kWide:
      return "wide_64B-64MiB";
  }
  return "?";
}

std::vector<uint64_t> MakeSizes(int64_t mix, size_t n, std::mt19937_64& rng) {
  std::vector<uint64_t> sizes(n);
  auto log_uniform = [&rng](double lo, double hi) {
    std::uniform_real_distribution<double> exp(std::log2(lo), std::log2(hi));
    return static_cast<uint64_t>(std::exp2(exp(rng)));
  };
  std::uniform_int_distribution<uint64_t> small(64, 4 * kKiB);
  for (auto& s : sizes) {
    switch (mix) {
      case kFixed64KiB:
        s = 64 * kKiB;
        break;
      case kSmall:
        s = small(rng);
        break;
      case kKvMixed:
        s = log_uniform(16 * kKiB, 4 * kMiB);
        break;
      default:
        s = log_uniform(64, 64 * kMiB);
        break;
    }
  }
  return sizes;
}

// Capacity sized so the pre-filled segment is ~75% full: high enough that
// the allocator works in fragmented free space, low enough that requests
// rarely fail (a failure is counted and the iteration still frees a range).
uint64_t CapacityFor(const std::vector<uint64_t>& sizes) {
  long double mean = 0;
  for (uint64_t s : sizes) mean += s;
  mean /= sizes.size();
  return static_cast<uint64_t>(mean * kLiveAllocations / 0.75L);
}

void BM_AllocFree(benchmark::State& state) {
  const int64_t mix = state.range(0);
  std::mt19937_64 rng(42);
  const std::vector<uint64_t> sizes = MakeSizes(mix, kPrecomputed, rng);
  std::vector<size_t> victims(kPrecomputed);
  std::uniform_int_distribution<size_t> pick(0, kLiveAllocations - 1);
  for (auto& v : victims) v = pick(rng);

  SegmentAllocator alloc(CapacityFor(sizes));
  std::vector<uint32_t> live(kLiveAllocations, 0);  // 0: empty slot
  for (size_t i = 0; i < kLiveAllocations; ++i) {
    if (auto a = alloc.Allocate(sizes[i % kPrecomputed])) live[i] = a->handle;
  }

  size_t i = 0;
  int64_t failures = 0;
  for (auto _ : state) {
    uint32_t& slot = live[victims[i]];
    if (slot != 0) alloc.Free(slot);
    auto a = alloc.Allocate(sizes[i]);
    slot = a ? a->handle : 0;
    failures += !a;
    i = (i + 1) % kPrecomputed;
  }
  state.SetItemsProcessed(state.iterations());  // one free + one alloc each
  state.SetLabel(MixName(mix));
  state.counters["fail%"] = 100.0 * static_cast<double>(failures) /
                            static_cast<double>(state.iterations());
  state.counters["used%"] = 100.0 * static_cast<double>(alloc.used()) /
                            static_cast<double>(alloc.capacity());
}
BENCHMARK(BM_AllocFree)->DenseRange(kFixed64KiB, kWide);

void BM_AllocFreePair(benchmark::State& state) {
  const int64_t mix = state.range(0);
  std::mt19937_64 rng(42);
  const std::vector<uint64_t> sizes = MakeSizes(mix, kPrecomputed, rng);
  SegmentAllocator alloc(64 * kGiB);
  size_t i = 0;
  for (auto _ : state) {
    auto a = alloc.Allocate(sizes[i]);
    benchmark::DoNotOptimize(a);
    alloc.Free(a->handle);
    i = (i + 1) % kPrecomputed;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(MixName(mix));
}
BENCHMARK(BM_AllocFreePair)->DenseRange(kFixed64KiB, kWide);

}  // namespace
}  // namespace kvpool

BENCHMARK_MAIN();
