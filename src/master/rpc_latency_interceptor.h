// Times every master RPC, from the arrival of its metadata to the sending of
// its status, into `kvpool_master_rpc_duration_seconds{method=...}`.
//
// The histogram of each method of kvpool.rpc.MasterService is registered when
// the factory is made, so a call finds its handle in a read-only map: no
// registry lookup and no lock on the RPC path.
#ifndef KVPOOL_MASTER_RPC_LATENCY_INTERCEPTOR_H_
#define KVPOOL_MASTER_RPC_LATENCY_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <map>
#include <string>

#include "common/metrics.h"

namespace kvpool {

class RpcLatencyInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcLatencyInterceptorFactory(MetricsRegistry* metrics);
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  // Full gRPC method name ("/kvpool.rpc.MasterService/PutStart") -> handle.
  // std::less<> finds by the call's const char* without making a string.
  std::map<std::string, Histogram*, std::less<>> by_method_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_RPC_LATENCY_INTERCEPTOR_H_
