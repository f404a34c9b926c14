// A holder: contributes a DRAM segment (a /dev/shm mapping) to the pool,
// serves it over the TCP data plane, and keeps itself alive at the master
// with heartbeats. When the master says it does not know this node (it
// restarted, or declared us dead), the node mounts its segment again.
// kvpool-node is this class with no workload; a client may embed one.
// Thread-safe.
#ifndef KVPOOL_NODE_NODE_H_
#define KVPOOL_NODE_NODE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/http_endpoint.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "node/dram_directory.h"
#include "node/node_config.h"
#include "node/segment_dir.h"
#include "node/segment_populator.h"
#include "node/ssd_tier.h"
#include "rpc/master_client.h"
#include "transport/segment_table.h"
#include "transport/shm_segment.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"

namespace kvpool {

class Node {
 public:
  // `clock` (must outlive the node) times the heartbeat and the SSD tier's
  // loops; tests pass a FakeClock.
  explicit Node(NodeConfig config, const Clock* clock = SystemClock::Default());
  ~Node();
  // Maps the segment, starts the data server, mounts at the master, starts
  // heartbeats. Fails (and cleans up) if any step fails.
  Status Start();
  // Unmounts (best effort), stops heartbeats and the data server, unmaps.
  void Stop();
  // For tests: stop heartbeating without unmounting, as a hung node would.
  void PauseHeartbeats(bool paused) { hb_paused_ = paused; }
  // For tests: a heartbeat call (a long poll) is in flight; after
  // PauseHeartbeats(true), false once the last one has returned.
  bool heartbeat_in_flight() const;

  const std::string& node_id() const { return config_.node_id; }
  std::string data_endpoint() const;
  uint64_t segment_id() const { return segment_id_.load(); }
  // COMPLETE replicas this node's DRAM directory holds (tests, metrics).
  size_t directory_size() const { return directory_.size(); }
  // The PREFETCH_BUFFER segment's id (0 when prefetch_buffer_segment is 0).
  uint64_t buffer_segment_id() const { return buffer_id_.load(); }
  int metrics_port() const { return http_ ? http_->port() : -1; }
  MetricsRegistry& metrics() { return metrics_; }
  // The SSD tier, or nullptr when enable_ssd_offload is off.
  SsdTier* ssd() { return ssd_.get(); }
  const DramDirectory& directory() const { return directory_; }
  // The background population of the node's segments (NodeConfig::
  // segment_prefault), nullptr when it is off.
  const SegmentPopulator* populator() const { return populator_.get(); }
  // The directory of this node's segment files (segment_dir.h); null
  // before Start and after Stop.
  const SegmentDir* segment_files() const { return dir_.get(); }
  // The node's DRAM segment (null before Start).
  const ShmSegment* segment() const { return segment_.get(); }
  // Tests, before Start: runs before each chunk is populated (may block).
  void SetPopulateHookForTest(std::function<void(uint64_t)> hook) {
    populate_hook_ = std::move(hook);
  }
  std::string StatusJson() const;

  // ---- extra segments: memory added while the node runs (Mooncake's
  // mount_segment and allocate_and_mount_segment) ----
  //
  // A further segment of this node: the master places values in it like in
  // the main one, under the node's capability key. Its memory goes back at
  // UnmountExtraSegment, so the SSD tier never copies into or out of it
  // directly (nothing is offloaded from it; a promotion into it goes over
  // the data plane), and the data server's requests on it are waited for
  // before the memory is let go. Each is named by a UUID string.
  //
  // Maps [offset, offset + size) of the regular file at `path` (offset a
  // multiple of the page size, the range inside the file; the caller's file
  // is never removed or resized). Served over TCP only: same-host clients
  // do not map memory that is not the node's to share. INVALID_PARAMS or
  // FILE_NOT_FOUND for a bad file or range; SEGMENT_ALREADY_EXISTS when it
  // shares bytes with a segment of this node (two segments over one memory
  // would hand out the same bytes twice); the master's code when it
  // refuses (UNAVAILABLE_IN_CURRENT_STATUS: a master older than extra
  // segments).
  Result<std::string> MountFileSegment(const std::string& path, uint64_t offset,
                                       uint64_t size);
  // Creates a segment file of `size` bytes rounded up to the page size
  // under /dev/shm and mounts it; same-host clients map it, as the main
  // segment. The file is removed at unmount.
  Result<std::string> AllocateExtraSegment(uint64_t size);
  // Takes an extra segment out of the pool: the master first (its values
  // become misses and nothing more is placed in it), then the data server
  // (waits for the requests in flight on it), then the mapping. If the
  // master cannot be told, nothing changes and its error is returned (try
  // again). SEGMENT_NOT_FOUND for an unknown name.
  Status UnmountExtraSegment(const std::string& name);
  struct ExtraSegmentInfo {
    std::string name;
    bool allocated = false;   // AllocateExtraSegment's, else a caller's file
    uint64_t segment_id = 0;  // the master's id; 0 while not mounted there
    uint64_t size = 0;
    std::string path;
    uint64_t file_offset = 0;
  };
  std::vector<ExtraSegmentInfo> extra_segments() const;

 private:
  struct Extra {
    std::unique_ptr<ShmSegment> memory;
    bool allocated = false;  // the node's own file: shm for same-host peers
    uint64_t id = 0;         // 0: not mounted at the current master
  };
  Result<std::string> AddExtra(std::unique_ptr<ShmSegment> memory,
                               bool allocated);
  // Mounts (closed), serves, then opens it at the master (extra_mu_ held).
  Status MountExtra(Extra* e, bool remount)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(extra_mu_);
  // Every extra segment not mounted at the current master (extra_mu_ held);
  // false if one failed (tried again on the next heartbeat).
  bool MountPendingExtras(bool remount)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(extra_mu_);
  // Mounts the node's segments (extra_mu_ taken: not held by the caller).
  Status Mount() ABSL_LOCKS_EXCLUDED(extra_mu_);
  Status MountOne(const ShmSegment& seg, rpc::SegmentKind kind,
                  std::atomic<uint64_t>* id);
  // Tells the master this node serves segment `id` (mounted closed until
  // then). An older master answers SEGMENT_NOT_FOUND for a main segment or
  // UNIMPLEMENTED: it never closed it, and MountOne goes on.
  Status OpenAtMaster(uint64_t id, const char* what);
  // After a remount: hands the directory of one segment to the master;
  // false if the master could not be told (tried again next beat).
  bool RegisterDirectory(int slot, const ShmSegment& seg, uint64_t id);
  std::optional<DramDirectory::SlotView> ResolveSlot(uint64_t segment_id) const;
  void HeartbeatLoop();
  // Waits on cv_ (mu_ held by `lock`) until clock_ reaches deadline_ms or
  // Stop().
  void WaitUntil(int64_t deadline_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  NodeConfig config_;
  const Clock* const clock_;
  std::unique_ptr<MasterClient> master_;
  // Shared with clients in this process (transport/local_segments.h),
  // which copy through this mapping rather than map the file again.
  std::shared_ptr<ShmSegment> segment_;
  std::shared_ptr<ShmSegment> buffer_;  // PREFETCH_BUFFER, optional
  std::unique_ptr<SegmentPopulator> populator_;
  // Where the segment files are (segment_dir.h), and its mount if any.
  std::unique_ptr<SegmentDir> dir_;
  std::string files_dir_;
  std::function<void(uint64_t)> populate_hook_;
  SegmentTable table_;  // every segment: what the data server serves
  // The node's own segments (main, prefetch buffer): what the SSD tier
  // copies into and out of directly. Extra segments are left out.
  SegmentTable own_table_;
  std::unique_ptr<TcpDataServer> data_server_;
  TcpDataClient tcp_;  // promotion writes into another node's segment
  std::shared_ptr<SsdTier> ssd_;  // shared with in-process readers
  std::unique_ptr<HttpEndpoint> http_;
  MetricsRegistry metrics_;
  std::atomic<uint64_t> segment_id_{0};
  std::atomic<uint64_t> buffer_id_{0};
  std::atomic<bool> hb_paused_{false};
  DramDirectory directory_;
  // Slots whose directory the master still has to hear (heartbeat thread).
  bool directory_pending_[DramDirectory::kSlots] = {false, false};

  // Extra segments by name; their mount, unmount and remount are serialised
  // by extra_mu_ (held across the master calls).
  mutable Mutex extra_mu_;
  std::map<std::string, Extra> extras_ ABSL_GUARDED_BY(extra_mu_);
  // Some extra is not mounted at the master.
  bool extras_pending_ ABSL_GUARDED_BY(extra_mu_) = false;
  bool extras_closed_ ABSL_GUARDED_BY(extra_mu_) = false;  // Stop: no more
  std::atomic<uint64_t> extra_files_{0};  // AllocateExtraSegment's files
  std::atomic<uint64_t> extra_bytes_{0};  // their sizes (metrics, no lock)

  mutable Mutex mu_;
  CondVar cv_;  // Stop() wakes the heartbeat thread's waits
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The poll in flight (Stop() cancels it).
  grpc::ClientContext* hb_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread hb_thread_;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_NODE_H_
