// What the liveness check costs a put over shared memory (issue #41, hole 1).
// Since the check, DataPlane::Write asks the kernel once per segment per
// batch whether the segment's node still holds its owner lock (one
// fcntl(F_OFD_GETLK)), after the copies. Measured in one run:
//
// BM_ShmWrite/<value bytes>/<batch>: DataPlane::Write of a batch into a
//   same-host segment through a client's own mapping of it (the path of a
//   put's data, check included).
// BM_OwnerCheck: the check alone.
// BM_Memcpy/<value bytes>/<batch>: the copies alone, the floor.
// BM_Put/<value bytes>/<batch>: a whole (batched) put over shared memory
//   through the real client, master and node (LocalCluster, one process),
//   the cost the check is added to once per batch and segment.
//
// The check's share of a put is BM_OwnerCheck / BM_Put; of the data
// plane's part alone, BM_OwnerCheck / BM_ShmWrite.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/data_plane.h"
#include "common/host_id.h"
#include "kvpool/local_cluster.h"
#include "transport/shm_segment.h"

namespace kvpool {
namespace {

constexpr uint64_t kSegment = 64ull << 20;

// A node's segment (this process plays the node, but the data plane maps
// the file itself, as a client process does).
std::unique_ptr<ShmSegment> NodeSegment() {
  static int n = 0;
  auto s = ShmSegment::Create(
      "kvpool-shmbench-" + std::to_string(getpid()) + "-" + std::to_string(++n),
      kSegment);
  return s.ok() ? std::move(s.value()) : nullptr;
}

std::vector<rpc::MemoryLocation> Locations(const ShmSegment& seg, uint64_t size,
                                           int batch) {
  std::vector<rpc::MemoryLocation> out(batch);
  for (int i = 0; i < batch; ++i) {
    auto& loc = out[i];
    loc.set_segment_id(1);
    loc.set_offset(uint64_t(i) * size % (kSegment - size));
    loc.set_length(size);
    loc.set_node_id("bench");
    loc.set_host_id(LocalHostId());
    loc.set_shm_path(seg.path());
    loc.set_data_endpoint("127.0.0.1:1");
    loc.set_segment_size(kSegment);
  }
  return out;
}

void BM_ShmWrite(benchmark::State& state) {
  const uint64_t size = uint64_t(state.range(0));
  const int batch = int(state.range(1));
  auto seg = NodeSegment();
  if (!seg) return state.SkipWithError("cannot create a segment");
  DataPlane dp(TransportMode::kShm);
  auto locs = Locations(*seg, size, batch);
  std::string value(size, 'v');
  std::vector<TransferItem> items(batch);
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) {
      items[i] = TransferItem{.loc = &locs[i],
                              .buf = reinterpret_cast<uint8_t*>(value.data()),
                              .length = size};
    }
    dp.Write(items);
    if (items[0].result != ErrorCode::OK)
      return state.SkipWithError("write failed");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * batch * size);
}

void BM_Memcpy(benchmark::State& state) {
  const uint64_t size = uint64_t(state.range(0));
  const int batch = int(state.range(1));
  auto seg = NodeSegment();
  if (!seg) return state.SkipWithError("cannot create a segment");
  auto locs = Locations(*seg, size, batch);
  std::string value(size, 'v');
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i)
      std::memcpy(seg->data() + locs[i].offset(), value.data(), size);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * batch * size);
}

void BM_OwnerCheck(benchmark::State& state) {
  auto seg = NodeSegment();
  if (!seg) return state.SkipWithError("cannot create a segment");
  auto view = ShmSegment::Open(seg->path(), kSegment);
  if (!view.ok()) return state.SkipWithError("cannot map the segment");
  for (auto _ : state) benchmark::DoNotOptimize(view.value()->OwnerAlive());
}

void BM_Put(benchmark::State& state) {
  const uint64_t size = uint64_t(state.range(0));
  const int batch = int(state.range(1));
  spdlog::set_level(spdlog::level::warn);  // a cluster per run logs its start
  LocalClusterOptions lco;
  lco.num_nodes = 1;
  lco.segment_size = 256ull << 20;
  LocalCluster cluster(lco);
  if (!cluster.Start().ok()) return state.SkipWithError("cluster");
  ClientConfig cc;
  cc.transport = TransportMode::kShm;
  auto client = cluster.NewClient(cc);
  if (!client.ok()) return state.SkipWithError("client");
  std::string value(size, 'v');
  std::vector<std::string> keys(batch);
  std::vector<std::string_view> values(batch, value);
  uint64_t n = 0;
  for (auto _ : state) {
    // Fresh keys, removed again outside the timing: the pool never fills.
    for (auto& k : keys) k = "k" + std::to_string(n++);
    auto r = client.value()->BatchPut(keys, values);
    if (!r[0].ok()) return state.SkipWithError(r[0].ToString().c_str());
    state.PauseTiming();
    for (const auto& k : keys) client.value()->Remove(k).IgnoreError();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * batch * size);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t size : {4 << 10, 64 << 10, 1 << 20}) {
    for (int64_t batch : {1, 32}) b->Args({size, batch});
  }
}

BENCHMARK(BM_ShmWrite)->Apply(Sizes);
BENCHMARK(BM_Memcpy)->Apply(Sizes);
BENCHMARK(BM_OwnerCheck);
BENCHMARK(BM_Put)->Apply(Sizes);

}  // namespace
}  // namespace kvpool

BENCHMARK_MAIN();
