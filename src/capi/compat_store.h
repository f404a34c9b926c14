// MooncakeStore: kvpool behind Mooncake Store's conventions, shared by the
// Python class kvpool.mooncake.MooncakeDistributedStore and the C API.
//
//  - setup() connects a kvpool::Client and, when global_segment_size > 0,
//    starts an in-process kvpool::Node that contributes that much DRAM (its
//    node id is "host:port" of its data server, which get_hostname() returns,
//    so ReplicateConfig.preferred_segment = get_hostname() places locally);
//    it also maps a local buffer that get_buffer() results are read into.
//  - Every call returns 0 or a positive value on success and a negative
//    Mooncake ErrorCode otherwise; invalid arguments (negative sizes, null or
//    unregistered pointers, mismatched lengths) are INVALID_PARAMS (-600) and
//    never touch memory. A store that is not set up answers INVALID_PARAMS.
//
// Thread-safe: calls run concurrently; setup() and close() wait for calls in
// flight.
#ifndef KVPOOL_CAPI_COMPAT_STORE_H_
#define KVPOOL_CAPI_COMPAT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capi/compat_config.h"
#include "capi/local_buffer.h"
#include "common/mutex.h"
#include "kvpool/client.h"

namespace kvpool {
class Node;
}

namespace kvpool::compat {

class MooncakeStore {
 public:
  using Bytes = std::span<const char>;
  using Ranges = std::vector<std::vector<std::vector<int64_t>>>;

  MooncakeStore();
  ~MooncakeStore();
  MooncakeStore(const MooncakeStore&) = delete;
  MooncakeStore& operator=(const MooncakeStore&) = delete;

  // As Mooncake, each setup(), whether it succeeded or failed, must be
  // followed by close() before another: a second one answers
  // INVALID_PARAMS and leaves the store as it is.
  int Setup(const SetupConfig& config);
  // setup(config_dict): the keys of SetupConfigFromDict.
  int SetupFromDict(const std::map<std::string, std::string>& dict);
  int Close();
  bool is_setup() const;

  int Put(std::string_view key, Bytes value,
          const MooncakeReplicateConfig& rc = {});
  int Upsert(std::string_view key, Bytes value,
             const MooncakeReplicateConfig& rc = {});
  int PutParts(std::string_view key, const std::vector<Bytes>& parts,
               const MooncakeReplicateConfig& rc = {});
  int UpsertParts(std::string_view key, const std::vector<Bytes>& parts,
                  const MooncakeReplicateConfig& rc = {});
  // 0 when every key was stored, else the first key's error.
  int PutBatch(const std::vector<std::string>& keys,
               const std::vector<Bytes>& values,
               const MooncakeReplicateConfig& rc = {});
  int UpsertBatch(const std::vector<std::string>& keys,
                  const std::vector<Bytes>& values,
                  const MooncakeReplicateConfig& rc = {});

  // The whole value (OBJECT_NOT_FOUND on a miss).
  Result<std::string> Get(std::string_view key);
  // nullptr on a miss or an error.
  std::shared_ptr<BufferHandle> GetBuffer(std::string_view key);
  std::vector<std::shared_ptr<BufferHandle>> BatchGetBuffer(
      const std::vector<std::string>& keys);

  int64_t GetSize(std::string_view key);
  // 1 exists, 0 does not, -1 error (Mooncake's convention).
  int IsExist(std::string_view key);
  std::vector<int> BatchIsExist(const std::vector<std::string>& keys);

  int Remove(std::string_view key, bool force = false);
  // One master call for all keys.
  std::vector<int> BatchRemove(const std::vector<std::string>& keys,
                               bool force = false);
  int64_t RemoveAll(bool force = false);  // objects removed
  int64_t RemoveByRegex(const std::string& regex, bool force = false);

  int RegisterBuffer(void* buf, int64_t size);
  int UnregisterBuffer(void* buf);
  // Zero-copy forms: buffers must lie inside a registered buffer.
  int PutFrom(std::string_view key, const void* buf, int64_t size,
              const MooncakeReplicateConfig& rc = {});
  std::vector<int> BatchPutFrom(const std::vector<std::string>& keys,
                                const std::vector<const void*>& bufs,
                                const std::vector<int64_t>& sizes,
                                const MooncakeReplicateConfig& rc = {});
  std::vector<int> BatchUpsertFrom(const std::vector<std::string>& keys,
                                   const std::vector<const void*>& bufs,
                                   const std::vector<int64_t>& sizes,
                                   const MooncakeReplicateConfig& rc = {});
  // The value is the metadata then the data (both registered).
  int PutFromWithMetadata(std::string_view key, const void* buf,
                          const void* metadata, int64_t size,
                          int64_t metadata_size,
                          const MooncakeReplicateConfig& rc = {});
  // Key i's value is the concatenation of its buffers, written with no
  // staging copy. Mismatched list lengths fail every key (as Mooncake).
  std::vector<int> BatchPutFromMultiBuffers(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<const void*>>& bufs,
      const std::vector<std::vector<int64_t>>& sizes,
      const MooncakeReplicateConfig& rc = {}, bool upsert = false);
  // Key i's value scattered over its buffers in order: the value's size, or
  // INVALID_PARAMS when the buffers hold fewer bytes.
  std::vector<int64_t> BatchGetIntoMultiBuffers(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<void*>>& bufs,
      const std::vector<std::vector<int64_t>>& sizes);
  // Only the ranges asked for: sizes[i][j] bytes at offsets[i][j] of key
  // i's value into bufs[i][j]. Bytes read per key, or a negative code.
  std::vector<int64_t> BatchGetIntoMultiBufferRanges(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<void*>>& bufs,
      const std::vector<std::vector<int64_t>>& sizes,
      const std::vector<std::vector<int64_t>>& offsets);
  // Put sessions (Mooncake's batch_put_session_*): start reserves the
  // sizes, the ranges calls fill them, end publishes, revoke drops.
  std::vector<int> BatchPutSessionStart(const std::vector<std::string>& keys,
                                        const std::vector<int64_t>& sizes,
                                        const MooncakeReplicateConfig& rc = {});
  // sizes[i][j] bytes from bufs[i][j] to offsets[i][j] of key i's reserved
  // object: bytes written per key, or a negative code.
  std::vector<int64_t> BatchPutFromMultiBufferRanges(
      const std::vector<std::string>& keys,
      const std::vector<std::vector<const void*>>& bufs,
      const std::vector<std::vector<int64_t>>& sizes,
      const std::vector<std::vector<int64_t>>& offsets);
  std::vector<int> BatchPutSessionEnd(const std::vector<std::string>& keys);
  std::vector<int> BatchPutSessionRevoke(const std::vector<std::string>& keys);
  // Get sessions: the ranges reads of these keys use one lookup and its
  // lease (LEASE_EXPIRED once it ends) until end.
  std::vector<int> BatchGetSessionStart(const std::vector<std::string>& keys);
  int BatchGetSessionEnd(const std::vector<std::string>& keys);
  int64_t GetInto(std::string_view key, void* buf, int64_t size);
  std::vector<int64_t> BatchGetInto(const std::vector<std::string>& keys,
                                    const std::vector<void*>& bufs,
                                    const std::vector<int64_t>& sizes);
  // results[i][j][k]: bytes copied for fragment k of key j into buffer i, or
  // a negative code. Only the fragments are read, each key's in one go. A
  // key whose lists of offsets and sizes differ in length fails alone (one
  // negative entry); a key with no fragments gets an empty list.
  Ranges GetIntoRanges(const std::vector<void*>& bufs,
                       const std::vector<std::vector<std::string>>& keys,
                       const Ranges& dst_offsets, const Ranges& src_offsets,
                       const Ranges& sizes);

  // The read-only tier lookup (no lease).
  std::vector<Result<TierInfo>> BatchGetReplicaDesc(
      const std::vector<std::string>& keys);
  // "host:port": the hosted segment's node id. A hosting store given no
  // port takes one in Mooncake's range for automatic ports, [12300, 14300];
  // "host:0" for a pure client.
  std::string GetHostname() const;
  // 0 when the master answers and the hosted segment (if any) is mounted.
  int HealthCheck();

  // Mooncake's mount_segment family: a hosting store (setup with a global
  // segment size > 0) adds memory to the pool as further segments of its
  // node (Node::MountFileSegment, Node::AllocateExtraSegment), each named
  // by a UUID string, and takes it back. As in Mooncake, every failure of
  // a mount is -1 (INTERNAL_ERROR; the reason is logged) with no ids.
  struct MountResult {
    int ret = 0;
    std::vector<std::string> segment_ids;
    uint64_t allocated_size = 0;  // AllocateAndMountSegment only
  };
  // [offset, offset + size) of the file at `path`, served over TCP only. A
  // zero size mounts nothing and succeeds (as in Mooncake) once the file
  // opens read-write and the offset is valid.
  MountResult MountSegment(const std::string& path, int64_t size,
                           int64_t offset);
  // `size` rounded up to the page size, in a new segment file.
  MountResult AllocateAndMountSegment(int64_t size);
  // Takes segments out of the pool (their values become misses) and gives
  // their memory back; each id must come from MountSegment, resp.
  // AllocateAndMountSegment. 0, or the first error: -1 for an id that is
  // not one (Mooncake's), the master's code when it cannot be told (that
  // segment stays mounted). `grace_period_seconds` is accepted: kvpool
  // unmounts at once.
  int UnmountSegment(const std::vector<std::string>& segment_ids,
                     int64_t grace_period_seconds);
  int UnmountAndFreeSegment(const std::vector<std::string>& segment_ids,
                            int64_t grace_period_seconds);

  // The client (nullptr before setup); for kvpool-specific calls.
  Client* client();

 private:
  // The refusal of a mount call on a store that hosts no node. Needs mu_.
  Status NotHosting() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int UnmountExtras(const std::vector<std::string>& segment_ids,
                    int64_t grace_period_seconds, bool allocated);
  // The puts of bytes from the caller's memory (Python bytes): key i's value
  // is the concatenation of values[i]. 0, or the first key's error.
  int PutBytes(const std::vector<std::string>& keys,
               const std::vector<std::vector<Bytes>>& values,
               const MooncakeReplicateConfig& rc, bool upsert);
  // Capacity from `p` to the end of the registered buffer holding it; 0 if
  // none does.
  uint64_t RegisteredCapacity(const void* p) const;

  // Shared by calls; exclusive for setup and close, so a store is never
  // replaced under a call in progress.
  mutable SharedMutex mu_;
  std::unique_ptr<Client> client_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Node> node_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<LocalBuffer> local_buffer_ ABSL_GUARDED_BY(mu_);
  std::string hostname_ ABSL_GUARDED_BY(mu_);
  bool setup_attempted_ ABSL_GUARDED_BY(mu_) = false;  // since last close()
  Mutex session_mu_;
  // Keys with an open get session.
  std::set<std::string> get_sessions_ ABSL_GUARDED_BY(session_mu_);
  mutable Mutex reg_mu_;
  // Registered buffers: base -> size.
  std::map<uintptr_t, uint64_t> registered_ ABSL_GUARDED_BY(reg_mu_);
};

}  // namespace kvpool::compat

#endif  // KVPOOL_CAPI_COMPAT_STORE_H_
