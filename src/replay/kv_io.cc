#include "replay/kv_io.h"

#include <algorithm>
#include <cstring>

#include "replay/clock_util.h"
#include "replay/engine.h"

namespace kvpool::replay {

std::vector<std::string> RequestKeys(const TraceRequest& t, size_t max_blocks) {
  const size_t n = std::min(t.hash_ids.size(), max_blocks);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) keys.push_back(BlockKey(t.hash_ids[i]));
  return keys;
}

PrefixLoad LoadPrefix(Client& client, const std::vector<std::string>& keys,
                      const TraceRequest& t, uint8_t* buf, uint64_t block_bytes,
                      bool exist_prefetch) {
  PrefixLoad l;
  const size_t n = keys.size();
  const uint64_t bb = block_bytes;
  l.start_s = NowSec();
  // The engine's lookup does not lease (Mooncake issue 3599); the get does.
  ExistOptions eo;
  eo.grant_lease = false;
  eo.prefetch_to_memory = exist_prefetch;
  auto exist = client.BatchIsExist(keys, eo);
  size_t matched = 0;
  while (matched < n && exist[matched].ok() && exist[matched].value()) {
    ++matched;
  }
  l.matched = uint32_t(matched);
  const double looked_up = NowSec();
  l.lookup_ms = (looked_up - l.start_s) * 1e3;

  l.probe.assign(matched, '-');
  if (matched > 0) {
    std::vector<std::string> pk(keys.begin(), keys.begin() + long(matched));
    auto d = client.BatchGetReplicaDesc(pk);
    for (size_t i = 0; i < matched; ++i) {
      if (!d[i].ok()) continue;
      std::string tier = d[i]->BestTier();
      l.probe[i] = tier == "memory" ? 'M' : tier == "local_disk" ? 'S' : 'P';
    }
  }
  l.get_start_s = NowSec();
  l.probe_ms = (l.get_start_s - looked_up) * 1e3;

  size_t read_ok = 0;
  if (matched > 0) {
    std::vector<std::string> gk(keys.begin(), keys.begin() + long(matched));
    std::vector<void*> ptrs(matched);
    std::vector<uint64_t> sizes(matched, bb);
    for (size_t i = 0; i < matched; ++i) ptrs[i] = buf + i * bb;
    const uint64_t ssd0 = client.counters().ssd_bytes_read;
    auto got = client.BatchGetInto(gk, ptrs, sizes);
    const uint64_t ssd_bytes = client.counters().ssd_bytes_read - ssd0;
    l.read_ms = (NowSec() - l.get_start_s) * 1e3;
    // A block that could not be read ends the usable prefix: the engine
    // recomputes from there.
    while (read_ok < matched && got[read_ok].ok() &&
           got[read_ok].value() == bb) {
      uint64_t id;
      std::memcpy(&id, ptrs[read_ok], sizeof(id));
      if (id != t.hash_ids[read_ok]) {
        ++l.corrupt;
        l.stop_cause = "corrupt";
        break;
      }
      ++read_ok;
    }
    if (read_ok < matched && l.stop_cause.empty()) {
      l.stop_cause =
          got[read_ok].ok() ? "short_read" : ErrorCodeName(got[read_ok].code());
    }
    l.ssd_reads = uint32_t(std::min<uint64_t>(read_ok, ssd_bytes / bb));
    l.dram_reads = uint32_t(read_ok) - l.ssd_reads;
    for (size_t i = 0; i < read_ok; ++i) l.probe_ssd += l.probe[i] == 'S';
  }
  l.read_ok = uint32_t(read_ok);
  l.done_s = NowSec();
  return l;
}

void ModelHostToGpuCopy(double h2d_ms_per_block, PrefixLoad* l) {
  if (h2d_ms_per_block <= 0 || l->read_ok == 0) return;
  const double until =
      l->get_start_s + double(l->read_ok) * h2d_ms_per_block / 1e3;
  if (until <= l->done_s) return;
  SleepUntilSec(until);
  l->read_ms += (until - l->done_s) * 1e3;
  l->done_s = until;
}

BlockStore StoreBlocks(Client& client, const std::vector<std::string>& keys,
                       const TraceRequest& t, size_t from, uint8_t* buf,
                       uint64_t block_bytes) {
  BlockStore s;
  const size_t n = keys.size();
  if (from >= n) return s;
  const uint64_t bb = block_bytes;
  std::vector<std::string> pk(keys.begin() + long(from), keys.end());
  std::vector<const void*> ptrs;
  std::vector<uint64_t> sizes(pk.size(), bb);
  for (size_t i = from; i < n; ++i) {
    uint8_t* p = buf + i * bb;
    std::memcpy(p, &t.hash_ids[i], sizeof(uint64_t));
    ptrs.push_back(p);
  }
  const double put_start = NowSec();
  auto st = client.BatchPutFrom(pk, ptrs, sizes);
  s.ms = (NowSec() - put_start) * 1e3;
  s.blocks = uint32_t(pk.size());
  for (const auto& x : st) s.failed += !x.ok();
  return s;
}

void RecordLoad(const PrefixLoad& l, const RouteInfo& route,
                RequestRecord* rec) {
  rec->matched = l.matched;
  rec->read_ok = l.read_ok;
  rec->dram_reads = l.dram_reads;
  rec->ssd_reads = l.ssd_reads;
  rec->probe_ssd = l.probe_ssd;
  rec->corrupt = l.corrupt;
  rec->lookup_ms = l.lookup_ms;
  rec->probe_ms = l.probe_ms;
  rec->load_ms = l.read_ms;
  rec->get_start_s = l.get_start_s;
  rec->read_stop = l.stop_cause;
  if (!route.routed) return;
  rec->window_ms = (l.get_start_s - route.routed_s) * 1e3;
  for (size_t j = 0; j < route.tiers.size(); ++j) {
    if (route.tiers[j] != 'S') continue;
    ++rec->route_ssd_only;
    if (j >= l.read_ok) {
      ++rec->route_ssd_not_read;
    } else if (l.probe[j] == 'S') {
      ++rec->route_ssd_read_ssd;
    } else {
      ++rec->route_ssd_read_dram;
    }
  }
}

}  // namespace kvpool::replay
