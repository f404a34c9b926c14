// kvpool::Client: what an inference engine links to put and get KV-cache
// blocks. Control calls go to kvpool-master over gRPC (one call per batch);
// bytes move over shared memory when the segment is on this host and over
// the TCP data plane otherwise.
//
// Thread-safe: one Client may be shared by many threads.
// Error codes are Mooncake Store's (see kvpool/status.h).
#ifndef KVPOOL_CLIENT_H_
#define KVPOOL_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvpool/options.h"
#include "kvpool/status.h"

namespace kvpool {

struct ClientCounters {
  uint64_t shm_bytes_read = 0;
  uint64_t shm_bytes_written = 0;
  uint64_t tcp_bytes_read = 0;
  uint64_t tcp_bytes_written = 0;
  uint64_t ssd_bytes_read = 0;  // values read from a holder's SSD
  uint64_t local_ssd_bytes_read =
      0;                          // ... of which from a holder in this process
  uint64_t lease_cache_hits = 0;  // gets answered without a master RPC
  // Lease caches dropped because a different master (a restart) answered.
  uint64_t lease_cache_resets = 0;
  // Keys whose write could not reach a node and were put again elsewhere.
  uint64_t put_retries = 0;
  // Keys whose put failed because the leading master changed under it
  // (docs/ha.md) and were put again, once, on the new leader.
  uint64_t put_retries_on_new_leader = 0;
  // Writes copied into a same-host node's shared memory that were not
  // acknowledged because the node no longer owned it after the copy (it
  // died or stopped): retried like a write a node could not take.
  uint64_t shm_writes_owner_gone = 0;
};

// Prefetch-on-exist counters of one client (all zero when the feature is
// off). prefetch_complete_total = completed, prefetch_fail_total = failed.
struct PrefetchStats {
  uint64_t triggers = 0;  // TriggerPrefetch calls (exist probes and get kicks)
  uint64_t keys_triggered = 0;    // keys that passed the throttle
  uint64_t dedup_hits = 0;        // keys skipped: prefetched within the window
  uint64_t cooldown_entries = 0;  // DRAM-pressure backoffs opened
  uint64_t cooldown_skips = 0;    // keys skipped during a backoff
  uint64_t delegations = 0;       // keys handed to a remote holder
  uint64_t completed = 0;         // promoted by an in-process holder
  uint64_t failed = 0;
  uint64_t already_resident = 0;  // in DRAM already, or a promotion in flight
  uint64_t not_ssd_only = 0;
  uint64_t dropped = 0;  // pool shut down or saturated
};

// A caller buffer: `size` bytes at `data`.
struct ConstSlice {
  const void* data = nullptr;
  uint64_t size = 0;
};

// A range of a value and where it goes: `length` bytes at `value_offset` of
// the value, to or from `buf`.
struct ValueRange {
  uint64_t value_offset = 0;
  void* buf = nullptr;
  uint64_t length = 0;
};

class Client {
 public:
  // Connects lazily: creation fails only on an invalid config.
  static Result<std::unique_ptr<Client>> Create(const ClientConfig& config);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Stores `value` under `key`. A key that already exists is left as it is
  // and the call succeeds (as in Mooncake); use Upsert to replace.
  Status Put(std::string_view key, std::string_view value,
             const ReplicateConfig& rc = {});
  Status Upsert(std::string_view key, std::string_view value,
                const ReplicateConfig& rc = {});
  std::vector<Status> BatchPut(const std::vector<std::string>& keys,
                               const std::vector<std::string_view>& values,
                               const ReplicateConfig& rc = {});

  Result<std::string> Get(std::string_view key);
  std::vector<Result<std::string>> BatchGet(
      const std::vector<std::string>& keys);
  // Copies the value into `buf`; returns its size. BUFFER_OVERFLOW (with
  // nothing written) when `size` is too small.
  Result<uint64_t> GetInto(std::string_view key, void* buf, uint64_t size);

  // Zero-copy forms: buffers must lie inside a registered region, else
  // INVALID_PARAMS.
  Status RegisterBuffer(void* buf, uint64_t size);
  Status UnregisterBuffer(void* buf);
  Status PutFrom(std::string_view key, const void* buf, uint64_t size,
                 const ReplicateConfig& rc = {});
  std::vector<Status> BatchPutFrom(const std::vector<std::string>& keys,
                                   const std::vector<const void*>& bufs,
                                   const std::vector<uint64_t>& sizes,
                                   const ReplicateConfig& rc = {});
  std::vector<Result<uint64_t>> BatchGetInto(
      const std::vector<std::string>& keys, const std::vector<void*>& bufs,
      const std::vector<uint64_t>& sizes);

  // Scatter/gather forms (one key's value split over several caller
  // buffers, e.g. per-layer K and V pages), with no staging copy on the
  // DRAM paths. Every buffer must lie inside a registered one, else that
  // key fails with INVALID_PARAMS.
  //
  // Key i's value is the concatenation of parts[i] (upsert: replace an
  // existing value).
  std::vector<Status> BatchPutFromParts(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ConstSlice>>& parts,
      const ReplicateConfig& rc = {}, bool upsert = false);
  // As BatchPutFromParts, from any memory (as Put: no registration).
  std::vector<Status> BatchPutParts(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ConstSlice>>& parts,
      const ReplicateConfig& rc = {}, bool upsert = false);
  // Key i's value fills bufs[i] in order (the last may be left partly
  // unwritten); INVALID_PARAMS if they hold fewer bytes than the value.
  // Returns the value's size.
  std::vector<Result<uint64_t>> BatchGetIntoParts(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ConstSlice>>& bufs);
  // Reads only the ranges asked for: ranges[i] of key i, each of which must
  // lie inside the value, else INVALID_PARAMS for that key; or, with
  // `outside` given, such ranges alone are skipped and (*outside)[i][k] set.
  // Returns the bytes read per key (the sum of its ranges' lengths).
  std::vector<Result<uint64_t>> BatchGetRanges(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ValueRange>>& ranges,
      std::vector<std::vector<bool>>* outside = nullptr);

  // Put sessions (two-phase puts, Mooncake's batch_put_session_*): Start
  // reserves `sizes[i]` bytes for key i, Write fills ranges of it (any
  // order, any number of calls), End publishes it, Revoke drops it. A key
  // is readable only after End. Writes must end within the master's write
  // grant (write_capability_ttl_ms plus 10 ms per MiB, 5 s by default);
  // a session never ended is reclaimed by the master's put timeouts. A
  // key with a session open is refused by another Start (INVALID_PARAMS)
  // until it ends.
  std::vector<Status> BatchPutSessionStart(const std::vector<std::string>& keys,
                                           const std::vector<uint64_t>& sizes,
                                           const ReplicateConfig& rc = {},
                                           bool upsert = false);
  // Bytes written per key; ranges must lie inside the reserved size and
  // inside registered buffers, else INVALID_PARAMS. OBJECT_NOT_FOUND for a
  // key without an open session.
  std::vector<Result<uint64_t>> BatchPutSessionWrite(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ValueRange>>& ranges);
  std::vector<Status> BatchPutSessionEnd(const std::vector<std::string>& keys);
  std::vector<Status> BatchPutSessionRevoke(
      const std::vector<std::string>& keys);
  // Get sessions: one lookup (and one lease) for several range reads of the
  // same keys, e.g. layer by layer. Reads after the lease ends fail with
  // LEASE_EXPIRED (the master may have reused the memory); start a new
  // session then. End forgets the keys' replica lists.
  std::vector<Status> BatchGetSessionStart(
      const std::vector<std::string>& keys);
  std::vector<Result<uint64_t>> BatchGetSessionRead(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ValueRange>>& ranges);
  Status BatchGetSessionEnd(const std::vector<std::string>& keys);

  // true / false, or an error (RPC_FAIL, INVALID_KEY).
  Result<bool> IsExist(std::string_view key, const ExistOptions& opts = {});
  std::vector<Result<bool>> BatchIsExist(const std::vector<std::string>& keys,
                                         const ExistOptions& opts = {});
  Result<uint64_t> GetSize(std::string_view key);

  Status Remove(std::string_view key, bool force = false);
  // One master call for all keys (per key as Remove; a master without the
  // batch call is asked key by key).
  std::vector<Status> BatchRemove(const std::vector<std::string>& keys,
                                  bool force = false);
  Result<uint64_t> RemoveAll(bool force = false);
  // Removes the keys of this tenant that `key_regex` matches as a whole;
  // the same lease rules as RemoveAll. RE2 syntax (linear-time matching on
  // the master: no backreferences or lookaround); INVALID_PARAMS for a
  // malformed expression, one RE2 cannot match in linear time, or one over
  // 4096 bytes.
  Result<uint64_t> RemoveByRegex(const std::string& key_regex,
                                 bool force = false);

  // The read-only tier lookup (BatchQueryReadOnly): no lease, no side
  // effects, no hit metrics.
  std::vector<Result<TierInfo>> BatchGetReplicaDesc(
      const std::vector<std::string>& keys);
  Result<ClusterReport> Stat();
  // The router trigger, for deployments without a router: asks the master to
  // move SSD-only keys to DRAM before their get (statuses per key).
  // UNAVAILABLE_IN_CURRENT_STATUS when the master has enable_prefetch_trigger
  // off or predates the RPC. `deadline_in_ms` > 0: when (ms from now) the
  // engine will read the keys; the master serves earlier deadlines first and
  // drops a promotion that could not start before its deadline (an older
  // master ignores it). INVALID_PARAMS if negative.
  Result<std::vector<PrefetchToMemoryStatus>> BatchPrefetchToMemory(
      const std::vector<std::string>& keys, int64_t deadline_in_ms = 0);

  ClientCounters counters() const;
  PrefetchStats prefetch_stats() const;
  // This client's metrics in Prometheus text format, for the process that
  // embeds it to serve: latency of puts, gets and exists by data path
  // (kvpool_client_op_duration_seconds; docs/metrics.md).
  std::string MetricsText() const;
  // Waits until queued prefetch work has been handed over (tests, benches).
  bool WaitPrefetchIdle(int64_t timeout_ms);
  const ClientConfig& config() const;

  // What a client holds; internal to src/client (client_state.h).
  struct State;

 private:
  explicit Client(std::unique_ptr<State> state);
  struct Replies;
  Replies FetchReplies(const std::vector<std::string_view>& keys);
  void ForgetCached(const std::vector<std::string>& keys);
  std::optional<Result<uint64_t>> CachedShmRead(std::string_view key, void* buf,
                                                uint64_t size);
  std::vector<Result<uint64_t>> ReadInto(
      const std::vector<std::string_view>& keys, const std::vector<void*>& bufs,
      const std::vector<uint64_t>& sizes, bool require_registered);
  std::vector<Status> PutParts(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ConstSlice>>& parts,
      const ReplicateConfig& rc, bool upsert, bool require_registered);
  // What ReadPieces does with each key's list of ranges.
  enum class PieceMode { kScatter, kRanges };
  std::vector<Result<uint64_t>> ReadPieces(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<ValueRange>>& pieces, PieceMode mode,
      std::vector<std::vector<bool>>* outside = nullptr);
  // PutManyAvoiding, and when the leading master changed meanwhile
  // (docs/ha.md), once more on the new leader for the keys that failed
  // with RPC_FAIL.
  // `pieces` (optional): key i's value is gathered from (*pieces)[i]
  // instead of bufs[i].
  std::vector<Status> PutMany(
      const std::vector<std::string>& keys,
      const std::vector<const uint8_t*>& bufs,
      const std::vector<uint64_t>& sizes, const ReplicateConfig& rc,
      bool upsert,
      const std::vector<std::vector<ValueRange>>* pieces = nullptr);
  // One attempt, then one retry of the keys whose write could not reach a
  // node, placed away from it.
  std::vector<Status> PutManyAvoiding(
      const std::vector<std::string>& keys,
      const std::vector<const uint8_t*>& bufs,
      const std::vector<uint64_t>& sizes, const ReplicateConfig& rc,
      bool upsert,
      const std::vector<std::vector<ValueRange>>* pieces = nullptr);
  // One attempt; `unreachable` gets the nodes a write failed to reach.
  std::vector<Status> PutManyOnce(
      const std::vector<std::string>& keys,
      const std::vector<const uint8_t*>& bufs,
      const std::vector<uint64_t>& sizes, const ReplicateConfig& rc,
      bool upsert, const std::vector<std::string>& excluded,
      std::vector<std::string>* unreachable,
      const std::vector<std::vector<ValueRange>>* pieces);
  std::unique_ptr<State> state_;
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_H_
