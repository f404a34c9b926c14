#include "master/master_server.h"

#include <set>

#include <fmt/format.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/auth.h"
#include "master/master_auth.h"
#include "master/master_grpc_service.h"
#include "master/rpc_latency_interceptor.h"

namespace kvpool {

namespace {

// TLS when a certificate and key are configured, else plaintext; with a CA
// as well, only clients holding a certificate it signed get in.
Result<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const MasterConfig& c) {
  if (c.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(
      c.tls_ca_file.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto cert = auth::ReadSmallFile(c.tls_cert_file);
  if (!cert.ok()) return cert.status();
  auto key = auth::ReadSmallFile(c.tls_key_file);
  if (!key.ok()) return key.status();
  if (!c.tls_ca_file.empty()) {
    auto ca = auth::ReadSmallFile(c.tls_ca_file);
    if (!ca.ok()) return ca.status();
    opts.pem_root_certs = std::move(ca.value());
  }
  opts.pem_key_cert_pairs.push_back(
      {std::move(key.value()), std::move(cert.value())});
  return grpc::SslServerCredentials(opts);
}

}  // namespace

MasterServer::MasterServer(MasterConfig config, const Clock* clock)
    : config_(std::move(config)),
      service_(std::make_unique<MasterService>(config_, clock)),
      grpc_service_(std::make_unique<MasterGrpcService>(service_.get())) {}

MasterServer::~MasterServer() { Stop(); }

void MasterServer::set_gate(std::shared_ptr<ServingGate> gate) {
  gate_ = gate;
  grpc_service_->set_gate(std::move(gate));
}

// /status, with the master's HA role in front when it has one.
std::string MasterServer::StatusJson() const {
  std::string json = service_->StatusJson();
  if (gate_ == nullptr) return json;
  const uint64_t epoch = gate_->ServingEpoch();
  std::string reason = epoch != 0 ? "" : gate_->NotServingReason();
  std::string escaped;
  for (char c : reason) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  json.insert(1,
              fmt::format(R"("ha":{{"role":"{}","epoch":{},"reason":"{}"}},)",
                          epoch != 0 ? "leader" : "standby", epoch, escaped));
  return json;
}

Status MasterServer::Start() {
  if (Status s = config_.Validate(); !s.ok()) return s;
  auto authorizer = RpcAuthorizer::Create(config_, &service_->metrics());
  if (!authorizer.ok()) return authorizer.status();
  grpc_service_->set_authorizer(std::move(authorizer.value()));
  auto creds = ServerCredentials(config_);
  if (!creds.ok()) return creds.status();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      config_.rpc_address + ":" + std::to_string(config_.rpc_port),
      creds.value(), &rpc_port_);
  builder.RegisterService(grpc_service_.get());
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<RpcLatencyInterceptorFactory>(&service_->metrics()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
      config_.rpc_thread_num);
  server_ = builder.BuildAndStart();
  if (!server_ || rpc_port_ == 0) {
    return Status(ErrorCode::RPC_FAIL,
                  "cannot listen on " + config_.rpc_address + ":" +
                      std::to_string(config_.rpc_port) +
                      (config_.tls_cert_file.empty()
                           ? ""
                           : " (or the TLS certificate and key are unusable)"));
  }
  if (!config_.cluster_secret_file.empty() && config_.tls_cert_file.empty() &&
      config_.rpc_address != "127.0.0.1") {
    spdlog::warn(
        "authentication without TLS: anyone who can watch the network can "
        "replay a captured call within auth_max_clock_skew_ms "
        "(docs/security.md)");
  }
  if (config_.metrics_port >= 0) {
    http_ = std::make_unique<HttpEndpoint>(
        [this] { return service_->metrics().RenderPrometheus(); },
        [this] { return StatusJson(); });
    AddMooncakeRoutes(http_.get());
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

// Mooncake master's segment listing, which integrations poll to see that
// the pool is up (SGLang's check_server waits for a non-empty answer): the
// names of mounted DRAM segments, one per line, and one segment's use. A
// node's extra segments (mount_segment) go under its name, as in Mooncake,
// where a client's segments share its hostname.
void MasterServer::AddMooncakeRoutes(HttpEndpoint* http) {
  http->AddTextRoute("/get_all_segments",
                     [this](const HttpEndpoint::Params&, std::string* body) {
                       std::set<std::string> seen;
                       for (const auto& seg : service_->Stats().segments) {
                         if (seg.info.kind != SegmentKind::kMain ||
                             !seen.insert(seg.info.node_id).second)
                           continue;
                         *body += seg.info.node_id + "\n";
                       }
                       return 200;
                     });
  http->AddTextRoute(
      "/query_segment",
      [this](const HttpEndpoint::Params& params, std::string* body) {
        auto it = params.find("segment");
        if (it == params.end() || it->second.empty()) {
          *body = "missing parameter: segment\n";
          return 400;
        }
        bool found = false;
        uint64_t used = 0, capacity = 0;
        for (const auto& seg : service_->Stats().segments) {
          if (seg.info.kind != SegmentKind::kMain ||
              seg.info.node_id != it->second) {
            continue;
          }
          found = true;
          used += seg.used;
          capacity += seg.info.capacity;
        }
        if (!found) {
          *body = "segment not found\n";
          return 404;
        }
        *body = it->second + "\nUsed(bytes): " + std::to_string(used) +
                "\nCapacity(bytes) : " + std::to_string(capacity) + "\n";
        return 200;
      });
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
