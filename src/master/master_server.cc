#include "master/master_server.h"

#include <chrono>
#include <functional>
#include <set>

#include <fmt/format.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "common/auth.h"
#include "common/fd_limits.h"
#include "master/master_auth.h"
#include "master/master_grpc_service.h"
#include "master/rpc_latency_interceptor.h"
#include "rpc/request_limits.h"

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
  if (!config_.kv_events_endpoint.empty() && !events_publisher_) {
    // Before anything is served, so no tier change goes unpublished.
    events::PublisherOptions o;
    o.endpoint = config_.kv_events_endpoint;
    o.replay_endpoint = config_.kv_events_replay_endpoint;
    o.topic = config_.kv_events_topic;
    o.buffer_steps = static_cast<size_t>(config_.kv_events_buffer_steps);
    o.hwm = static_cast<int>(config_.kv_events_hwm);
    o.max_queue_size = static_cast<size_t>(config_.kv_events_max_queue_size);
    // Held until this master serves (OpenEventStream): a standby publishes
    // nothing, and a reset comes first on every master's stream.
    o.await_stream = true;
    auto pub = std::make_unique<events::KvEventPublisher>(std::move(o),
                                                          &service_->metrics());
    if (Status s = pub->Start(); !s.ok()) return s;
    events_publisher_ = std::move(pub);
    service_->set_event_queue(events_publisher_->queue());
  }
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
  // What one request may be (rpc/request_limits.h): a bigger one is
  // refused by gRPC before it is parsed, RESOURCE_EXHAUSTED with the limit.
  const uint64_t max_request = MaxRequestBytes(
      uint64_t(config_.max_key_bytes), uint64_t(config_.max_tenant_name_bytes));
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_request));
  builder.SetMaxSendMessageSize(256 << 20);
  // Connections that never complete the HTTP/2 handshake (idle TCP), and
  // connections left without calls, give their descriptors back.
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(config_.rpc_handshake_timeout_ms));
  if (config_.rpc_max_connection_idle_ms > 0) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_IDLE_MS,
        static_cast<int>(config_.rpc_max_connection_idle_ms));
  }
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
  // gRPC 1.51 gives up a listener whose accept4() fails with EMFILE
  // (common/fd_limits.h): this one sheds connections instead.
  if (!GuardAccepts(rpc_port_)) {
    spdlog::warn(
        "rpc port {}: too many guarded listeners in this process; "
        "descriptor exhaustion may stop it accepting",
        rpc_port_);
  }
  guarded_port_ = rpc_port_;
  if (gate_ == nullptr) {
    // A master without HA serves from here on (calls may already be in:
    // their events are queued, and follow the reset). Its epoch is when it
    // started, so a restarted master's stream has a new, larger one.
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    OpenEventStream(
        static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now).count()),
        address());
  }
  for (const bool full : {false, true}) {
    service_->metrics().AddGauge(
        "kvpool_master_rpc_connections_shed",
        full ? "reason=\"table_full\"" : "reason=\"near_limit\"",
        [full] {
          const AcceptGuardStats s = GetAcceptGuardStats();
          return double(full ? s.shed_table_full : s.shed_near_limit);
        },
        "connections to the rpc port closed at accept, since the process "
        "started, for want of file descriptors (common/fd_limits.h)");
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
  heap_trimmer_ = std::make_unique<HeapTrimmer>(
      HeapTrimmer::Options{config_.heap_trim_threshold_bytes,
                           std::chrono::milliseconds(1000)},
      &service_->metrics().GetCounter(
          "kvpool_master_heap_trims_total", "",
          "times freed heap memory was given back to the kernel"),
      &service_->metrics().GetCounter("kvpool_master_heap_trimmed_bytes_total",
                                      "",
                                      "resident bytes those trims gave back"));
  heap_trimmer_->Start();
  spdlog::info(
      "kvpool-master serving on {} (metrics port {}); requests of at most {} "
      "items and {} bytes; {}",
      address(), metrics_port(), kMaxBatchItems, max_request,
      config_.ToString());
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
  if (heap_trimmer_) heap_trimmer_->Stop();
  if (http_) http_->Stop();
  // Release long-poll heartbeats first, or Shutdown waits for them.
  service_->nodes().WakeAll();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  if (guarded_port_ > 0) {
    UnguardAccepts(guarded_port_);
    guarded_port_ = 0;
  }
  service_->Stop();
  // After the service: what it pushed last is still published. The queue
  // stays (the service may be called until it is destroyed; a push then
  // is queued and never sent).
  if (events_publisher_) events_publisher_->Stop();
}

void MasterServer::OpenEventStream(uint64_t epoch, const std::string& leader) {
  if (!events_publisher_) return;
  std::function<bool()> serving;
  if (gate_ != nullptr) {
    // The lease clock, asked before each batch: once this term's lease is
    // up, nothing more is published, even before HaMaster notices.
    serving = [gate = gate_, epoch] { return gate->ServingEpoch() == epoch; };
  }
  events_publisher_->OpenStream(epoch, leader, std::move(serving));
}

void MasterServer::CloseEventStream() {
  if (events_publisher_) events_publisher_->CloseStream();
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
