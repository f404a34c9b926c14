// The per-call latency stage of kvpool bench master: exist, get and put
// through kvpool::Client against a one-node LocalCluster, at batch 1 and
// 128, beside the floor measured in the same run: the same gRPC channel
// carrying a BatchExistKey of no keys (the RPC framework's round trip with
// no per-key work). What a call costs above the floor is kvpool's own.
#include "bench/call_latency_bench.h"

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <memory>

#include "benchutil/bench_util.h"
#include "kvpool/local_cluster.h"
#include "master/master_server.h"
#include "rpc/master_client.h"

namespace kvpool {

namespace {
using bench::Percentile;

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

  // Each case is one call; the cases take turns in short rounds so that the
  // machine's drift between seconds lands on all of them alike (the floor
  // above all: it is what the others are read against).
  struct Case {
    std::string op;
    int batch;
    std::function<void()> call;
    std::function<void()> after;  // untimed, after each call
    std::vector<double> lat;
  };
  std::vector<Case> cases;
  MasterClient raw(cluster.master().address(), 5000);
  bool ok = true;
  // The floor: one round trip of the same RPC with no keys, on a channel of
  // its own (the client skips empty calls), so nothing per key is done.
  cases.push_back({"floor: BatchExistKey RPC, no keys",
                   0,
                   [&] {
                     rpc::ExistKeyRequest req;
                     rpc::ExistKeyResponse resp;
                     ok &= raw.Call(&rpc::MasterService::Stub::BatchExistKey,
                                    req, &resp)
                               .ok();
                   },
                   nullptr,
                   {}});
  struct Batch {
    std::vector<std::string> keys;
    std::vector<const void*> srcs;
    std::vector<void*> dsts;
    std::vector<uint64_t> lens;
    int round = 0;
  };
  std::vector<std::unique_ptr<Batch>> batches;
  for (int batch : {1, 128}) {
    auto b = std::make_unique<Batch>();
    b->lens.assign(batch, kValueBytes);
    for (int j = 0; j < batch; ++j) {
      b->keys.push_back(fmt::format("lat-{}-{}", batch, j));
      b->srcs.push_back(src.data() + uint64_t(j) * kValueBytes);
      b->dsts.push_back(dst.data() + uint64_t(j) * kValueBytes);
    }
    for (const Status& st : c.BatchPutFrom(b->keys, b->srcs, b->lens))
      ok &= st.ok();
    Batch* p = b.get();
    batches.push_back(std::move(b));
    cases.push_back({"exist",
                     batch,
                     [&c, &ok, p] {
                       for (auto& r : c.BatchIsExist(p->keys))
                         ok &= r.ok() && r.value();
                     },
                     nullptr,
                     {}});
    cases.push_back({"get (4 KiB, shm)",
                     batch,
                     [&c, &ok, p] {
                       for (const auto& r :
                            c.BatchGetInto(p->keys, p->dsts, p->lens))
                         ok &= r.ok();
                     },
                     nullptr,
                     {}});
    // Fresh keys each call; every 64 calls the values are removed, untimed,
    // so that no put waits for eviction.
    cases.push_back({"put (4 KiB, shm)",
                     batch,
                     [&c, &ok, p, batch] {
                       std::vector<std::string> fresh;
                       for (int j = 0; j < batch; ++j)
                         fresh.push_back(fmt::format("lat-put-{}-{}-{}", batch,
                                                     p->round, j));
                       ++p->round;
                       for (const Status& st :
                            c.BatchPutFrom(fresh, p->srcs, p->lens))
                         ok &= st.ok();
                     },
                     [&c, p] {
                       if (p->round % 64 == 0) {
                         for (int j = 0; j < p->round; ++j) {
                           std::vector<std::string> old;
                           for (size_t k = 0; k < p->keys.size(); ++k)
                             old.push_back(fmt::format("lat-put-{}-{}-{}",
                                                       p->keys.size(), j, k));
                           (void)c.BatchRemove(old, true);
                         }
                         p->round = 0;
                       }
                     },
                     {}});
  }
  constexpr int kRounds = 5;
  for (int r = 0; r < kRounds; ++r) {
    for (auto& cs : cases) {
      const double start = bench::NowSec();
      int n = 0;
      while (n < 10 || bench::NowSec() - start < seconds / kRounds) {
        const double t = bench::NowSec();
        cs.call();
        cs.lat.push_back(bench::NowSec() - t);
        if (cs.after) cs.after();
        ++n;
      }
    }
  }
  std::vector<CallLatencyRow> rows;
  for (auto& cs : cases) {
    rows.push_back(CallLatencyRow{cs.op, cs.batch, Percentile(cs.lat, 50) * 1e6,
                                  Percentile(cs.lat, 99) * 1e6});
  }
  ok &= std::memcmp(src.data(), dst.data(), dst.size()) == 0;
  if (!ok) return Status(ErrorCode::INTERNAL_ERROR, "a call failed");
  return rows;
}

}  // namespace kvpool
