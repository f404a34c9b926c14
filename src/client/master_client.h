// A gRPC connection to kvpool-master with deadlines. Every call returns
// RPC_FAIL (with gRPC's message) when the master cannot be reached, so
// callers never block forever on a dead master. Thread-safe.
#ifndef KVPOOL_CLIENT_MASTER_CLIENT_H_
#define KVPOOL_CLIENT_MASTER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "kvpool.grpc.pb.h"
#include "kvpool/status.h"

namespace kvpool {

class MasterClient {
 public:
  MasterClient(const std::string& address, int timeout_ms);

  // Calls `method` of the stub, e.g.
  //   Call(&rpc::MasterService::Stub::PutEnd, req, &resp)
  // A gRPC UNIMPLEMENTED (an older master without this RPC) maps to
  // UNAVAILABLE_IN_CURRENT_STATUS so callers can degrade quietly.
  template <typename Req, typename Resp>
  Status Call(grpc::Status (rpc::MasterService::Stub::*method)(
                  grpc::ClientContext*, const Req&, Resp*),
              const Req& req, Resp* resp) const {
    grpc::ClientContext ctx;
    grpc::Status s = Invoke(&ctx, method, req, resp);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // The channel still held a connection to a master that has gone (a
      // restart): the first call on it fails at once. Once more, waiting
      // for the new connection, so a restart costs callers no failed call;
      // at most a second, so a master that is down still fails fast.
      grpc::ClientContext again;
      again.set_wait_for_ready(true);
      s = Invoke(&again, method, req, resp, std::min(timeout_ms_, 1000));
    }
    return ToStatus(s);
  }
  // The same with a caller-owned context (so another thread may TryCancel
  // it, e.g. to end a long-poll heartbeat at shutdown); no second try.
  template <typename Req, typename Resp>
  Status CallWith(grpc::ClientContext* ctx,
                  grpc::Status (rpc::MasterService::Stub::*method)(
                      grpc::ClientContext*, const Req&, Resp*),
                  const Req& req, Resp* resp) const {
    return ToStatus(Invoke(ctx, method, req, resp));
  }

  const std::string& address() const { return address_; }

 private:
  template <typename Req, typename Resp>
  grpc::Status Invoke(grpc::ClientContext* ctx,
                      grpc::Status (rpc::MasterService::Stub::*method)(
                          grpc::ClientContext*, const Req&, Resp*),
                      const Req& req, Resp* resp, int timeout_ms = -1) const {
    ctx->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(timeout_ms < 0 ? timeout_ms_ : timeout_ms));
    return (stub_.get()->*method)(ctx, req, resp);
  }
  Status ToStatus(const grpc::Status& s) const {
    if (s.ok()) return Status::OK();
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                    "master lacks RPC: " + s.error_message());
    }
    return Status(ErrorCode::RPC_FAIL,
                  "master " + address_ + ": " + s.error_message());
  }
  std::string address_;
  int timeout_ms_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::MasterService::Stub> stub_;
};

}  // namespace kvpool

#endif  // KVPOOL_CLIENT_MASTER_CLIENT_H_
