#include "master/master_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "master/master_grpc_service.h"

namespace kvpool {

MasterServer::MasterServer(MasterConfig config, const Clock* clock)
    : config_(std::move(config)),
      service_(std::make_unique<MasterService>(config_, clock)),
      grpc_service_(std::make_unique<MasterGrpcService>(service_.get())) {}

MasterServer::~MasterServer() { Stop(); }

Status MasterServer::Start() {
  if (Status s = config_.Validate(); !s.ok()) return s;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      config_.rpc_address + ":" + std::to_string(config_.rpc_port),
      grpc::InsecureServerCredentials(), &rpc_port_);
  builder.RegisterService(grpc_service_.get());
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
      config_.rpc_thread_num);
  server_ = builder.BuildAndStart();
  if (!server_ || rpc_port_ == 0) {
    return Status(ErrorCode::RPC_FAIL, "cannot listen on " +
                                           config_.rpc_address + ":" +
                                           std::to_string(config_.rpc_port));
  }
  if (config_.metrics_port >= 0) {
    http_ = std::make_unique<HttpEndpoint>(
        [this] { return service_->metrics().RenderPrometheus(); },
        [this] { return service_->StatusJson(); });
    if (Status s = http_->Start(config_.rpc_address, config_.metrics_port);
        !s.ok()) {
      Stop();
      return s;
    }
  }
  service_->Start();
  spdlog::info("kvpool-master serving on {} (metrics port {}); {}", address(),
               metrics_port(), config_.ToString());
  return Status::OK();
}

void MasterServer::Stop() {
  if (http_) http_->Stop();
  // Release long-poll heartbeats first, or Shutdown waits for them.
  service_->nodes().WakeAll();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  service_->Stop();
}

void MasterServer::Wait() {
  if (server_) server_->Wait();
}

std::string MasterServer::address() const {
  std::string host =
      config_.rpc_address == "0.0.0.0" ? "127.0.0.1" : config_.rpc_address;
  return host + ":" + std::to_string(rpc_port_);
}

}  // namespace kvpool
