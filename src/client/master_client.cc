#include "client/master_client.h"

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
    : address_(address), timeout_ms_(timeout_ms) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  // Fail fast and retry on the next call rather than queueing behind a
  // reconnect backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (security.tls) {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = std::move(security.tls_root_certs);
    opts.pem_cert_chain = std::move(security.tls_cert_chain);
    opts.pem_private_key = std::move(security.tls_private_key);
    creds = grpc::SslCredentials(opts);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  if (security.credential) {
    credential_ = std::make_shared<const auth::Credential>(
        std::move(*security.credential));
  }
  channel_ = grpc::CreateCustomChannel(address, creds, args);
  stub_ = rpc::MasterService::NewStub(channel_);
}

}  // namespace kvpool
