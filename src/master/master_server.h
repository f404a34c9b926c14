// A running kvpool-master: MasterService behind a gRPC server, plus the
// /metrics and /status HTTP endpoint. Used by tools/kvpool_master.cc and by
// LocalCluster.
#ifndef KVPOOL_MASTER_MASTER_SERVER_H_
#define KVPOOL_MASTER_MASTER_SERVER_H_

#include <memory>

#include "common/heap_trim.h"
#include "common/http_endpoint.h"
#include "events/kv_event_publisher.h"
#include "master/master_config.h"
#include "master/master_service.h"
#include "master/serving_gate.h"

namespace grpc {
class Server;
}

namespace kvpool {

class MasterGrpcService;

class MasterServer {
 public:
  explicit MasterServer(MasterConfig config,
                        const Clock* clock = SystemClock::Default());
  ~MasterServer();
  // Before Start: under HA (docs/ha.md), every RPC asks `gate` first.
  void set_gate(std::shared_ptr<ServingGate> gate);
  // Validates the config, binds (port 0 = any free port) and starts serving.
  Status Start();
  void Stop();
  // Blocks until Stop() is called from another thread.
  void Wait();

  int rpc_port() const { return rpc_port_; }
  int metrics_port() const { return http_ ? http_->port() : -1; }
  std::string address() const;  // "host:port" clients should dial
  MasterService& service() { return *service_; }
  MasterGrpcService& grpc_service() { return *grpc_service_; }
  // The KV events publisher (docs/kv_events.md); null while they are off.
  events::KvEventPublisher* events_publisher() {
    return events_publisher_.get();
  }
  // KV events publish nothing until the master serves: then its stream
  // begins with a reset naming `leader` and `epoch` (docs/kv_events.md,
  // "Failover and restart"). Start opens it for a master without a gate,
  // with the microsecond it started as epoch; under HA, HaMaster opens it
  // with the leader's epoch once it leads (after the gate opens: the stream
  // closes itself when the gate no longer serves that epoch), and closes
  // it when it stops leading. No-ops while KV events are off.
  void OpenEventStream(uint64_t epoch, const std::string& leader);
  void CloseEventStream();

 private:
  MasterConfig config_;
  // Before service_, which pushes into its queue: destroyed after it.
  std::unique_ptr<events::KvEventPublisher> events_publisher_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<MasterGrpcService> grpc_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpEndpoint> http_;
  void AddMooncakeRoutes(HttpEndpoint* http);
  std::string StatusJson() const;
  std::shared_ptr<ServingGate> gate_;
  std::unique_ptr<HeapTrimmer> heap_trimmer_;
  int rpc_port_ = 0;
  int guarded_port_ = 0;  // the rpc port, while its accepts are guarded
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_SERVER_H_
