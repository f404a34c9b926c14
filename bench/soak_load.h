// The load of `kvpool bench soak` and its checker. Each load thread owns a
// kvpool::Client and a key prefix of its own, so it always knows what the
// store may answer for its keys: the latest version it wrote and had
// acknowledged (or nothing after an acknowledged remove), plus the
// versions of writes that failed (which may or may not have landed). Any
// other answer is a WRONG READ. Values are a deterministic function of
// (key, version), so a read's bytes say which version they are, and torn or
// foreign bytes are caught too.
#ifndef KVPOOL_BENCH_SOAK_LOAD_H_
#define KVPOOL_BENCH_SOAK_LOAD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bench/soak_sampler.h"
#include "kvpool/client.h"

namespace kvpool::soak {

constexpr uint64_t kMinValueBytes = 64ull << 10;
constexpr uint64_t kMaxValueBytes = 1ull << 20;

// The value of (key, version): its size in [kMinValueBytes,
// kMaxValueBytes], a 32-byte header (magic, key hash, version, size), then
// pseudo-random words seeded by (key, version).
uint64_t KeyHash(const std::string& key);
uint64_t ValueSize(uint64_t key_hash, uint64_t version);
void FillValue(uint64_t key_hash, uint64_t version, uint8_t* buf);
// Empty when `buf` (n bytes) is exactly some version's value of the key
// (stored in *version); else what is wrong with it.
std::string CheckValue(uint64_t key_hash, const uint8_t* buf, uint64_t n,
                       uint64_t* version);

// Kinds of call the load makes.
enum class OpKind {
  kPut,
  kBatchPut,
  kUpsert,
  kGet,         // BatchGetInto of own keys
  kForeignGet,  // BatchGetInto of another client's key (consistency only)
  kExist,
  kExistPrefetch,  // BatchIsExist with prefetch_to_memory
  kRemove,
  kBatchRemove,
  kPrefetch,  // BatchPrefetchToMemory
  kSweep,     // the final read of every key
  kCount
};
const char* OpName(OpKind op);

// Shared by all load threads; read by the sampler.
struct LoadStats {
  LatencyLog put_latency;  // Put, BatchPutFrom and Upsert calls
  LatencyLog get_latency;  // BatchGetInto calls
  std::atomic<uint64_t> calls[int(OpKind::kCount)] = {};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> hits{0};    // reads that returned a (correct) value
  std::atomic<uint64_t> misses{0};  // OBJECT_NOT_FOUND
  std::atomic<uint64_t> wrong_reads{0};

  // Per "op:ERROR_CODE", for the report: failures that are not wrong reads
  // (a full pool refusing a put, a lease refusing a remove, ...).
  void CountError(OpKind op, ErrorCode code);
  std::map<std::string, uint64_t> Errors();
  // Prints the first 100 and counts all.
  void WrongRead(int client, const std::string& key, const std::string& what);

 private:
  std::mutex mu_;
  std::map<std::string, uint64_t> errors_;
  uint64_t printed_ = 0;
};

struct LoadOptions {
  int client_index = 0;
  int num_clients = 1;
  int keys_per_client = 160;
  std::string master_address;
  bool tcp = false;  // force the TCP data plane (else shared memory)
  uint64_t seed = 1;
};

class LoadClient {
 public:
  LoadClient(LoadOptions opts, LoadStats* stats);
  Status Init();
  // Runs the mix until `stop`; one call at a time, so that every answer
  // about an own key can be judged against the calls before it.
  void Run(const std::atomic<bool>& stop);
  // After Run: reads every own key once (hits must be the latest version).
  void FinalSweep();

 private:
  // What this client knows about one of its keys.
  struct KeyState {
    std::string name;
    uint64_t hash = 0;
    uint64_t acked = 0;  // version of the last acknowledged write; 0: none
    // Versions of writes that failed since: any of them may have landed.
    std::vector<uint64_t> maybe;
    uint64_t removed_version = 0;  // acked when the last remove was acked
    uint64_t next_version = 1;
    bool surely_absent() const { return acked == 0 && maybe.empty(); }
  };

  size_t PickKey();  // skewed: a hot eighth gets half the picks
  std::vector<size_t> PickDistinct(int n);
  void DoPut(bool batch);
  void DoUpsert();
  void DoGet();
  void DoForeignGet();
  void DoExist(bool prefetch);
  void DoRemove(bool batch);
  void DoPrefetch();
  void Written(KeyState& k, uint64_t version, const Status& s, OpKind op);
  void Removed(KeyState& k, const Status& s, OpKind op);
  // Judges the answer of a read of own key `k` into `buf`.
  void CheckOwnRead(KeyState& k, const Result<uint64_t>& r, const uint8_t* buf,
                    OpKind op);
  void ReadKeys(const std::vector<size_t>& idx, OpKind op);
  std::string Describe(const KeyState& k) const;

  LoadOptions opts_;
  LoadStats* stats_;
  std::unique_ptr<Client> client_;
  std::vector<KeyState> keys_;
  std::mt19937_64 rng_;
  // Registered once: BatchPutFrom and BatchGetInto need registered memory.
  std::vector<uint8_t> put_buf_, get_buf_;
};

}  // namespace kvpool::soak

#endif  // KVPOOL_BENCH_SOAK_LOAD_H_
