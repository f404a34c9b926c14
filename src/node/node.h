// A holder: contributes a DRAM segment (a /dev/shm mapping) to the pool,
// serves it over the TCP data plane, and keeps itself alive at the master
// with heartbeats. When the master says it does not know this node (it
// restarted, or declared us dead), the node mounts its segment again.
// kvpool-node is this class with no workload; a client may embed one.
// Thread-safe.
#ifndef KVPOOL_NODE_NODE_H_
#define KVPOOL_NODE_NODE_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "client/master_client.h"
#include "common/http_endpoint.h"
#include "common/metrics.h"
#include "node/dram_directory.h"
#include "node/node_config.h"
#include "node/ssd_tier.h"
#include "transport/segment_table.h"
#include "transport/shm_segment.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"

namespace kvpool {

class Node {
 public:
  explicit Node(NodeConfig config);
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
  std::string StatusJson() const;

 private:
  Status Mount();
  Status MountOne(const ShmSegment& seg, rpc::SegmentKind kind,
                  std::atomic<uint64_t>* id);
  // After a remount: hands the directory of one segment to the master;
  // false if the master could not be told (tried again next beat).
  bool RegisterDirectory(int slot, const ShmSegment& seg, uint64_t id);
  std::optional<DramDirectory::SlotView> ResolveSlot(uint64_t segment_id) const;
  void HeartbeatLoop();

  NodeConfig config_;
  std::unique_ptr<MasterClient> master_;
  std::unique_ptr<ShmSegment> segment_;
  std::unique_ptr<ShmSegment> buffer_;  // PREFETCH_BUFFER, optional
  SegmentTable table_;
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

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  grpc::ClientContext* hb_ctx_ = nullptr;  // the poll in flight, under mu_
  std::thread hb_thread_;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_NODE_H_
