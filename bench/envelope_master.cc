#include "bench/envelope_master.h"

#include <fmt/format.h>

#include <cstdio>

#include "benchutil/bench_util.h"

namespace kvpool::bench {

std::string EnvelopeKey(uint64_t i) { return fmt::format("key-{:010d}", i); }

namespace {
MasterConfig EnvelopeConfig() {
  MasterConfig mc;
  mc.rpc_port = 0;
  mc.metrics_port = -1;
  // Long enough that the nodes survive the fill between beats on the fake
  // clock; the node-death figure advances the clock past it on purpose.
  mc.client_ttl = 10;
  return mc;
}
}  // namespace

EnvelopeMaster::EnvelopeMaster(int nodes, int big_share_every, bool remount)
    : svc_(std::make_unique<MasterService>(EnvelopeConfig(), &clock_)),
      big_share_every_(big_share_every) {
  for (int i = 0; i < nodes; ++i) {
    SegmentInfo seg;
    seg.node_id = fmt::format("node-{:04d}", i);
    // Virtual: 1 TiB a node, room for any step (the allocator keeps no
    // per-byte state).
    seg.capacity = 1ull << 40;
    seg.data_endpoint = "127.0.0.1:1";
    auto id = svc_->MountSegment(seg, /*ssd_enabled=*/false,
                                 /*pulls_promotions=*/false, remount,
                                 /*keeps_dram_directory=*/remount);
    MustOk(id.status(), "MountSegment");
    node_ids_.push_back(seg.node_id);
    segments_.push_back(id.value());
  }
}

EnvelopeMaster::~EnvelopeMaster() = default;

void EnvelopeMaster::Fill(uint64_t from, uint64_t to, int batch,
                          std::vector<double>* batch_latency) {
  const uint64_t tenth = std::max<uint64_t>(1, (to - from) / 10);
  std::vector<std::string> keys;
  PutOptions plain;
  PutOptions big;
  big.preferred_node = node_ids_[0];
  uint64_t next_report = from + tenth;
  for (uint64_t i = from; i < to;) {
    keys.clear();
    const uint64_t end = std::min(to, i + uint64_t(batch));
    for (uint64_t j = i; j < end; ++j) keys.push_back(EnvelopeKey(j));
    const double t0 = NowSec();
    for (uint64_t j = i; j < end; ++j) {
      const PutOptions& o =
          (big_share_every_ > 0 && j % uint64_t(big_share_every_) == 0) ? big
                                                                        : plain;
      MustOk(svc_->PutStart("", keys[j - i], kEnvelopeValueBytes, o).status(),
             "PutStart");
    }
    for (const Status& s : svc_->BatchPutEnd("", keys)) MustOk(s, "PutEnd");
    if (batch_latency != nullptr) batch_latency->push_back(NowSec() - t0);
    // A millisecond per batch: objects differ in age, as eviction's LRU
    // order expects.
    clock_.Advance(1);
    i = end;
    if (i >= next_report) {
      std::fprintf(stderr, "    put %lu/%lu\n", i, to);
      next_report += tenth;
    }
  }
}

void EnvelopeMaster::HeartbeatAll(int skip) {
  for (int i = 0; i < nodes(); ++i) {
    if (i != skip) MustOk(svc_->Heartbeat(node_ids_[i]), "Heartbeat");
  }
}

}  // namespace kvpool::bench
