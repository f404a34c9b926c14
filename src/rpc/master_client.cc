#include "rpc/master_client.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "common/epoch_header.h"
#include "ha/leader_election.h"
#include "transport/wire_format.h"

namespace kvpool {

Result<MasterSecurity> LoadMasterSecurity(const MasterSecurityFiles& files) {
  MasterSecurity out;
  if (!files.credential_file.empty()) {
    auto c = auth::LoadCredential(files.credential_file, files.secret_role,
                                  files.secret_principal);
    if (!c.ok()) return c.status();
    out.credential = std::move(c.value());
  }
  if (files.tls_cert_file.empty() != files.tls_key_file.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "tls_cert_file and tls_key_file go together");
  }
  if (!files.tls_cert_file.empty() && files.tls_ca_file.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "a client certificate needs tls_ca_file (TLS to the master)");
  }
  if (files.tls_ca_file.empty()) return out;
  out.tls = true;
  auto ca = auth::ReadSmallFile(files.tls_ca_file);
  if (!ca.ok()) return ca.status();
  out.tls_root_certs = std::move(ca.value());
  if (!files.tls_cert_file.empty()) {
    auto cert = auth::ReadSmallFile(files.tls_cert_file);
    if (!cert.ok()) return cert.status();
    auto key = auth::ReadSmallFile(files.tls_key_file);
    if (!key.ok()) return key.status();
    out.tls_cert_chain = std::move(cert.value());
    out.tls_private_key = std::move(key.value());
  }
  return out;
}

std::string MasterClient::TokenFor(const char* method) const {
  const int64_t now = auth::UnixNowMs();
  std::lock_guard<std::mutex> lock(token_mu_);
  auto& [issued, token] = tokens_[method];
  if (token.empty() || now - issued >= 1000 || now < issued) {
    issued = now;
    token = credential_->Token(method, now);
  }
  return token;
}

MasterClient::MasterClient(const std::string& address, int timeout_ms,
                           MasterSecurity security)
    : timeout_ms_(timeout_ms) {
  args_.SetMaxReceiveMessageSize(256 << 20);
  // The largest request any master accepts (its max_key_bytes and
  // max_tenant_name_bytes at their maximum, the data plane's limits); a
  // master configured lower refuses it itself.
  args_.SetMaxSendMessageSize(static_cast<int>(
      MaxRequestBytes(wire::kMaxKeySize, wire::kMaxTenantSize)));
  // Fail fast and retry on the next call rather than queueing behind a
  // reconnect backoff of up to two minutes.
  args_.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (security.tls) {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = std::move(security.tls_root_certs);
    opts.pem_cert_chain = std::move(security.tls_cert_chain);
    opts.pem_private_key = std::move(security.tls_private_key);
    creds_ = grpc::SslCredentials(opts);
  } else {
    creds_ = grpc::InsecureChannelCredentials();
  }
  if (security.credential) {
    credential_ = std::make_shared<const auth::Credential>(
        std::move(*security.credential));
  }
  constexpr std::string_view kEtcd = "etcd://";
  if (address.rfind(kEtcd, 0) != 0) {
    fixed_ = Dial(address, 0);
    return;
  }
  std::string rest = address.substr(kEtcd.size());
  std::string cluster = "kvpool";
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    cluster = rest.substr(slash + 1);
    rest.resize(slash);
  }
  auto endpoints = ha::ParseEndpoints(rest);
  if (!endpoints.ok()) {
    address_error_ = endpoints.status();
    return;
  }
  if (cluster.empty() || cluster.find('/') != std::string::npos) {
    address_error_ = Status(ErrorCode::INVALID_PARAMS,
                            "bad cluster id in master address " + address);
    return;
  }
  etcd_list_ = rest;
  leader_key_ = ha::LeaderKey(cluster);
  etcd_ = std::make_unique<ha::EtcdClient>(std::move(endpoints.value()),
                                           std::min(timeout_ms_, 1000));
}

MasterClient::~MasterClient() = default;

std::shared_ptr<const MasterClient::Conn> MasterClient::Dial(
    const std::string& address, uint64_t epoch) const {
  auto c = std::make_shared<Conn>();
  c->address = address;
  c->epoch = epoch;
  grpc::ChannelArguments args = args_;
  c->channel = grpc::CreateCustomChannel(address, creds_, args);
  c->stub = rpc::MasterService::NewStub(c->channel);
  return c;
}

std::string MasterClient::address() const {
  if (fixed_) return fixed_->address;
  std::lock_guard<std::mutex> lock(conn_mu_);
  return current_ ? current_->address : std::string();
}

Result<std::shared_ptr<const MasterClient::Conn>> MasterClient::Connection()
    const {
  if (fixed_) return fixed_;
  if (!etcd_) return address_error_;
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    if (current_) return current_;
  }
  auto c = FollowLeader(nullptr, timeout_ms_);
  if (!c) {
    return Status(ErrorCode::RPC_FAIL, "no kvpool-master leads " + leader_key_ +
                                           " in etcd (" + etcd_list_ + ")");
  }
  return c;
}

std::shared_ptr<const MasterClient::Conn> MasterClient::FollowLeader(
    std::shared_ptr<const Conn> stale, int wait_ms) const {
  std::lock_guard<std::mutex> follow(follow_mu_);
  {
    // Another caller may have moved on while this one waited.
    std::lock_guard<std::mutex> lock(conn_mu_);
    if (current_ && current_ != stale) return current_;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  std::string last_error;
  for (;;) {
    auto leader = ha::FindLeader(etcd_.get(), leader_key_);
    if (leader.ok() && leader.value()) {
      const ha::LeaderInfo& l = *leader.value();
      if (!stale || l.epoch != stale->epoch || l.address != stale->address) {
        auto next = Dial(l.address, l.epoch);
        uint64_t known = known_epoch_.load();
        while (l.epoch > known &&
               !known_epoch_.compare_exchange_weak(known, l.epoch)) {
        }
        {
          std::lock_guard<std::mutex> lock(conn_mu_);
          current_ = next;
        }
        if (stale) {
          leader_changes_.fetch_add(1, std::memory_order_relaxed);
          spdlog::info("master: following the leader at {} (epoch {})",
                       l.address, l.epoch);
        }
        return next;
      }
    } else if (!leader.ok() && leader.status().message() != last_error) {
      last_error = leader.status().message();
      spdlog::warn("master: cannot read the leader from etcd: {}", last_error);
    }
    if (std::chrono::steady_clock::now() >= deadline) return stale;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool MasterClient::SaysTokenInBody(const grpc::ClientContext& ctx) {
  const auto& md = ctx.GetServerInitialMetadata();
  return md.find(auth::kBodyTokenHeader) != md.end();
}

bool MasterClient::IgnoredTokenInBody(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAUTHENTICATED &&
         s.error_message().starts_with(auth::kMissingCredential);
}

grpc::Status MasterClient::CheckEpoch(const grpc::ClientContext& ctx) const {
  const auto& md = ctx.GetServerInitialMetadata();
  auto it = md.find(kEpochHeader);
  if (it == md.end()) return grpc::Status::OK;  // a master without HA
  uint64_t epoch = 0;
  for (char ch : it->second) {
    if (ch < '0' || ch > '9') return grpc::Status::OK;
    epoch = epoch * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (AcceptEpoch(epoch)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "a master of an older epoch (" + std::to_string(epoch) +
                          ", seen " + std::to_string(known_epoch()) +
                          ") answered: reply ignored");
}

bool MasterClient::AcceptEpoch(uint64_t epoch) const {
  if (epoch == 0) return true;
  uint64_t known = known_epoch_.load();
  while (epoch > known) {
    if (known_epoch_.compare_exchange_weak(known, epoch)) return true;
  }
  if (epoch == known) return true;
  // A stale leader answered: make the next call ask etcd again.
  std::lock_guard<std::mutex> lock(conn_mu_);
  if (current_ && current_->epoch == epoch) current_.reset();
  return false;
}

}  // namespace kvpool
