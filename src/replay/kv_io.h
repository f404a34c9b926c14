// What a simulated engine asks of the store for one request, shared by the
// serial and the batching engine: look the prompt's blocks up and read the
// stored prefix (the KV load), and store the blocks it computed.
#ifndef KVPOOL_REPLAY_KV_IO_H_
#define KVPOOL_REPLAY_KV_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/client.h"
#include "replay/trace.h"

namespace kvpool::replay {

struct RequestRecord;
struct RouteInfo;

// The store keys of a request's blocks, at most `max_blocks` of them.
std::vector<std::string> RequestKeys(const TraceRequest& t, size_t max_blocks);

struct PrefixLoad {
  uint32_t matched = 0;     // longest prefix the lookup found
  uint32_t read_ok = 0;     // ... of which read (a failed read ends it)
  uint32_t dram_reads = 0;  // read_ok = dram_reads + ssd_reads
  uint32_t ssd_reads = 0;   // from Client::counters().ssd_bytes_read
  uint32_t probe_ssd = 0;   // read blocks the tier probe saw SSD-only
  uint32_t corrupt = 0;     // read, but not the bytes that were stored
  double start_s = 0;       // steady clock
  double get_start_s = 0;   // BatchGetInto issued (after the probe)
  double done_s = 0;
  double lookup_ms = 0, probe_ms = 0, read_ms = 0;
  std::vector<char> probe;  // per matched block: 'M', 'S', 'P' or '-'
  // Why the read prefix ended before `matched`: the failed get's ErrorCode
  // name, "short_read" (fewer bytes than a block) or "corrupt"; empty when
  // every matched block was read.
  std::string stop_cause;
};

// BatchIsExist (no lease; prefetch_to_memory when `exist_prefetch`), a
// read-only tier probe of the matched prefix (instrumentation: which tier
// each get should hit), then one BatchGetInto of the prefix into `buf`
// (registered, keys.size() x block_bytes). Every block's first 8 bytes must
// be its hash id; a block that fails or differs ends the usable prefix.
PrefixLoad LoadPrefix(Client& client, const std::vector<std::string>& keys,
                      const TraceRequest& t, uint8_t* buf, uint64_t block_bytes,
                      bool exist_prefetch);

// The modelled host-to-GPU copy of the blocks `load` read: the load ends
// no earlier than its get's start + read_ok x `h2d_ms_per_block` (the copy
// is pipelined with the reads, so a slower read hides it). Waits that out
// on the calling loader, which the copy occupies, and moves done_s.
void ModelHostToGpuCopy(double h2d_ms_per_block, PrefixLoad* load);

struct BlockStore {
  uint32_t blocks = 0, failed = 0;
  double ms = 0;
};
// Stores keys[from..] (the blocks the engine computed) with BatchPutFrom
// from `buf`, each block stamped with its hash id.
BlockStore StoreBlocks(Client& client, const std::vector<std::string>& keys,
                       const TraceRequest& t, size_t from, uint8_t* buf,
                       uint64_t block_bytes);

// Copies `load` into `rec` and, for a routed request, sorts the blocks that
// were SSD-only at routing time by what their get did.
void RecordLoad(const PrefixLoad& load, const RouteInfo& route,
                RequestRecord* rec);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_KV_IO_H_
