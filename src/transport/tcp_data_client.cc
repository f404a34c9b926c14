// TcpDataClient's calls: each validates its ops (settling here those the
// server would refuse), cuts them into requests within the server's limits
// and runs the requests on one connection, retrying once on a fresh one if
// a pooled connection turns out closed. Connections, frames and TLS are in
// tcp_data_client_pool.h, tcp_data_client_frames.h and
// tcp_data_client_tls.h.
#include "transport/tcp_data_client.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "transport/tcp_data_client_frames.h"
#include "transport/tcp_data_client_hello.h"
#include "transport/tcp_data_client_pool.h"
#include "transport/wire_format.h"

namespace kvpool {
namespace {

using data_client::Batch;
using data_client::CheckNodeId;
using data_client::Connection;
using data_client::ExchangeKeyReads;
using data_client::ExchangePrefetch;
using data_client::ExchangeRanges;
using data_client::IoFailure;
using data_client::Printable;
using data_client::SplitKeyReads;
using data_client::SplitPrefetch;
using data_client::SplitRanges;

uint8_t* OpBuffer(ReadOp& op) { return op.dest; }
const uint8_t* OpBuffer(WriteOp& op) { return op.src; }

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= wire::kMaxKeySize;
}

}  // namespace

class TcpDataClient::Impl {
 public:
  explicit Impl(const TcpDataClientOptions& options)
      : options_(options), pool_(options) {}

  template <typename OpT>
  Status Run(const std::string& endpoint, const std::string& node_id,
             std::span<OpT> ops);
  Status ReadKeys(const std::string& endpoint, const std::string& node_id,
                  std::span<KeyReadOp> ops);
  Status Prefetch(const std::string& endpoint, const std::string& node_id,
                  const std::string& tenant,
                  const std::vector<std::string>& keys,
                  const std::vector<std::string>* tokens, bool for_next_get,
                  std::vector<ErrorCode>* results);
  void Forget(const std::string& endpoint) { pool_.Forget(endpoint); }

 private:
  // Runs `exchange(conn, i, failure)` for every i < `exchanges` on one
  // connection to `node_id` at `endpoint`, in order; on failure drops the
  // node's idle connections and, if the connection was a pooled one the
  // peer had closed, starts over once on a new one. Returns OK, the
  // connect/HELLO error, or TRANSFER_FAIL.
  template <typename F>
  Status OnConnection(const std::string& endpoint, const std::string& node_id,
                      size_t exchanges, F&& exchange);

  const TcpDataClientOptions options_;
  data_client::ConnectionPool pool_;
};

template <typename OpT>
Status TcpDataClient::Impl::Run(const std::string& endpoint,
                                const std::string& node_id,
                                std::span<OpT> ops) {
  if (Status s = CheckNodeId(node_id); !s.ok()) {
    for (OpT& op : ops) op.result = ErrorCode::INVALID_PARAMS;
    return s;
  }
  // Ops the server would reject anyway (or that would make us touch a null
  // buffer) are settled here and never sent.
  std::vector<uint32_t> sendable;
  sendable.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    OpT& op = ops[i];
    if (op.length == 0 || op.length > wire::kMaxPayload ||
        OpBuffer(op) == nullptr) {
      op.result = ErrorCode::INVALID_PARAMS;
    } else {
      op.result = ErrorCode::OK;
      sendable.push_back(static_cast<uint32_t>(i));
    }
  }
  if (sendable.empty()) return Status::OK();

  // Split into frames within the server's limits; all go over one connection.
  const std::vector<Batch> batches =
      SplitRanges(std::span<const OpT>(ops), sendable);

  Status s = OnConnection(endpoint, node_id, batches.size(),
                          [&](Connection& conn, size_t i, IoFailure* failure) {
                            return ExchangeRanges(conn.link(), ops, batches[i],
                                                  failure);
                          });
  if (!s.ok()) {
    for (OpT& op : ops) op.result = s.code();
  }
  return s;
}

template <typename F>
Status TcpDataClient::Impl::OnConnection(const std::string& endpoint,
                                         const std::string& node_id,
                                         size_t exchanges, F&& exchange) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto conn = pool_.Take(endpoint, node_id, &reused);
    if (!conn.ok()) return conn.status();
    IoFailure failure;
    bool ok = true;
    for (size_t i = 0; i < exchanges && ok; ++i) {
      ok = exchange(**conn, i, &failure);
    }
    if (ok) {
      pool_.Give(endpoint, node_id, std::move(*conn));
      return Status::OK();
    }
    // The other idle connections most likely share the failed one's fate
    // (the node restarted or died); drop them so they are not tried next.
    pool_.DropIdle(endpoint, node_id);
    // A pooled connection the node closed while it sat idle says nothing
    // about the node now: retry once on a fresh one, which must pass the
    // HELLO again (a different process may hold the port by now). Every op
    // is idempotent, so repeating a partly done batch is harmless.
    if (attempt == 0 && reused && failure.peer_closed) continue;
    return Status(ErrorCode::TRANSFER_FAIL,
                  "data transfer with node '" + Printable(node_id) + "' at " +
                      endpoint + " failed: " + failure.message);
  }
}

Status TcpDataClient::Impl::ReadKeys(const std::string& endpoint,
                                     const std::string& node_id,
                                     std::span<KeyReadOp> ops) {
  if (Status s = CheckNodeId(node_id); !s.ok()) {
    for (KeyReadOp& op : ops) op.result = ErrorCode::INVALID_PARAMS;
    return s;
  }
  // Ops the server would refuse (and that would make it refuse the whole
  // request) are settled here and never sent.
  std::vector<uint32_t> sendable;
  sendable.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    KeyReadOp& op = ops[i];
    if (op.length == 0 || op.length > wire::kMaxPayload || op.dest == nullptr ||
        !ValidKey(op.key) || op.tenant.size() > wire::kMaxTenantSize) {
      op.result = ErrorCode::INVALID_PARAMS;
    } else {
      op.result = ErrorCode::OK;
      sendable.push_back(static_cast<uint32_t>(i));
    }
  }
  if (sendable.empty()) return Status::OK();

  // Split into requests within the frame limits and the buffer budget; an
  // op larger than the budget on its own still goes, alone.
  const std::vector<Batch> batches =
      SplitKeyReads(std::span<const KeyReadOp>(ops), sendable,
                    options_.max_ssd_read_frame_bytes);

  Status s = OnConnection(endpoint, node_id, batches.size(),
                          [&](Connection& conn, size_t i, IoFailure* failure) {
                            return ExchangeKeyReads(conn.link(), ops,
                                                    batches[i], failure);
                          });
  if (!s.ok()) {
    for (KeyReadOp& op : ops) op.result = s.code();
  }
  return s;
}

Status TcpDataClient::Impl::Prefetch(const std::string& endpoint,
                                     const std::string& node_id,
                                     const std::string& tenant,
                                     const std::vector<std::string>& keys,
                                     const std::vector<std::string>* tokens,
                                     bool for_next_get,
                                     std::vector<ErrorCode>* results_out) {
  std::vector<ErrorCode> local;
  std::vector<ErrorCode>& results = results_out ? *results_out : local;
  results.assign(keys.size(), ErrorCode::OK);
  auto fail_all = [&](Status s) {
    std::fill(results.begin(), results.end(), s.code());
    return s;
  };
  if (Status s = CheckNodeId(node_id); !s.ok()) return fail_all(s);
  if (tenant.size() > wire::kMaxTenantSize) {
    return fail_all(Status(ErrorCode::INVALID_PARAMS,
                           "tenant of " + std::to_string(tenant.size()) +
                               " bytes, at most " +
                               std::to_string(wire::kMaxTenantSize)));
  }
  std::vector<uint32_t> sendable;
  sendable.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (ValidKey(keys[i])) {
      sendable.push_back(static_cast<uint32_t>(i));
    } else {
      results[i] = ErrorCode::INVALID_PARAMS;
    }
  }
  if (sendable.empty()) return Status::OK();

  const std::vector<Batch> batches = SplitPrefetch(tenant, keys, sendable);

  bool unsupported = false;
  Status s = OnConnection(endpoint, node_id, batches.size(),
                          [&](Connection& conn, size_t i, IoFailure* failure) {
                            if (i == 0)
                              unsupported = false;  // a retry starts over
                            return ExchangePrefetch(
                                conn.link(), tenant, keys, tokens, batches[i],
                                for_next_get, results, &unsupported, failure);
                          });
  if (!s.ok()) return fail_all(s);
  if (unsupported) {
    for (uint32_t idx : sendable) {
      results[idx] = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
    }
    return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                  "node '" + Printable(node_id) + "' at " + endpoint +
                      " does not serve PREFETCH");
  }
  return Status::OK();
}

TcpDataClient::TcpDataClient() : TcpDataClient(TcpDataClientOptions{}) {}

TcpDataClient::TcpDataClient(const TcpDataClientOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

TcpDataClient::~TcpDataClient() = default;

Status TcpDataClient::Read(const std::string& endpoint,
                           const std::string& expected_node_id,
                           std::span<ReadOp> ops) {
  return impl_->Run(endpoint, expected_node_id, ops);
}

Status TcpDataClient::Write(const std::string& endpoint,
                            const std::string& expected_node_id,
                            std::span<WriteOp> ops) {
  return impl_->Run(endpoint, expected_node_id, ops);
}

Status TcpDataClient::ReadKeys(const std::string& endpoint,
                               const std::string& expected_node_id,
                               std::span<KeyReadOp> ops) {
  return impl_->ReadKeys(endpoint, expected_node_id, ops);
}

Status TcpDataClient::Prefetch(const std::string& endpoint,
                               const std::string& expected_node_id,
                               const std::string& tenant,
                               const std::vector<std::string>& keys,
                               std::vector<ErrorCode>* results,
                               const std::vector<std::string>* tokens,
                               bool for_next_get) {
  return impl_->Prefetch(endpoint, expected_node_id, tenant, keys, tokens,
                         for_next_get, results);
}

void TcpDataClient::Forget(const std::string& endpoint) {
  impl_->Forget(endpoint);
}

}  // namespace kvpool
