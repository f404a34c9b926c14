// The per-call latency stage of kvpool bench master: exist, get and put
// through kvpool::Client against a one-node LocalCluster, at batch 1 and
// 128, beside the floor measured in the same run: the same gRPC channel
// carrying a BatchExistKey of no keys (the RPC framework's round trip with
// no per-key work). What a call costs above the floor is kvpool's own.
#include "bench/call_latency_bench.h"

#include <fmt/format.h>

#include <cstring>

#include "bench/bench_util.h"
#include "client/master_client.h"
#include "kvpool/local_cluster.h"
#include "master/master_server.h"

namespace kvpool {

namespace {
using bench::Percentile;
using bench::Sample;

constexpr uint64_t kValueBytes = 4096;
}  // namespace

Result<std::vector<CallLatencyRow>> MeasureCallLatency(double seconds) {
  LocalClusterOptions lo;
  lo.num_nodes = 1;
  lo.segment_size = 256ull << 20;
  LocalCluster cluster(lo);
  if (Status s = cluster.Start(); !s.ok()) return s;
  auto made = cluster.NewClient();
  if (!made.ok()) return made.status();
  Client& c = *made.value();
  std::vector<uint8_t> src(128 * kValueBytes, 0x5a), dst(src.size());
  if (Status s = c.RegisterBuffer(src.data(), src.size()); !s.ok()) return s;
  if (Status s = c.RegisterBuffer(dst.data(), dst.size()); !s.ok()) return s;

  std::vector<CallLatencyRow> rows;
  auto add = [&](const std::string& op, int batch, std::vector<double> lat) {
    rows.push_back(CallLatencyRow{op, batch, Percentile(lat, 50) * 1e6,
                                  Percentile(lat, 99) * 1e6});
  };
  bool ok = true;
  // The floor: one round trip of the same RPC with no keys, on a channel of
  // its own (the client skips empty calls), so nothing per key is done.
  MasterClient raw(cluster.master().address(), 5000);
  add("floor: BatchExistKey RPC, no keys", 0, Sample(seconds, 50, [&] {
        rpc::ExistKeyRequest req;
        rpc::ExistKeyResponse resp;
        ok &=
            raw.Call(&rpc::MasterService::Stub::BatchExistKey, req, &resp).ok();
      }));
  for (int batch : {1, 128}) {
    std::vector<std::string> keys;
    std::vector<const void*> srcs;
    std::vector<void*> dsts;
    std::vector<uint64_t> lens(batch, kValueBytes);
    for (int j = 0; j < batch; ++j) {
      keys.push_back(fmt::format("lat-{}-{}", batch, j));
      srcs.push_back(src.data() + uint64_t(j) * kValueBytes);
      dsts.push_back(dst.data() + uint64_t(j) * kValueBytes);
    }
    for (const Status& s : c.BatchPutFrom(keys, srcs, lens)) ok &= s.ok();
    add("exist", batch, Sample(seconds, 50, [&] {
          for (auto& r : c.BatchIsExist(keys)) ok &= r.ok() && r.value();
        }));
    add("get (4 KiB, shm)", batch, Sample(seconds, 50, [&] {
          for (const auto& r : c.BatchGetInto(keys, dsts, lens)) ok &= r.ok();
        }));
    int round = 0;
    add("put (4 KiB, shm)", batch, Sample(seconds, 50, [&] {
          std::vector<std::string> fresh;
          for (int j = 0; j < batch; ++j)
            fresh.push_back(fmt::format("lat-put-{}-{}-{}", batch, round, j));
          ++round;
          for (const Status& s : c.BatchPutFrom(fresh, srcs, lens))
            ok &= s.ok();
          if (round % 64 == 0) (void)c.RemoveAll(true);  // bounded memory
        }));
  }
  ok &= std::memcmp(src.data(), dst.data(), dst.size()) == 0;
  if (!ok) return Status(ErrorCode::INTERNAL_ERROR, "a call failed");
  return rows;
}

}  // namespace kvpool
