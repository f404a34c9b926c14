#include "master/rpc_latency_interceptor.h"

#include <google/protobuf/descriptor.h>

#include <chrono>
#include <string_view>

#include "kvpool.pb.h"

namespace kvpool {
namespace {

using grpc::experimental::InterceptionHookPoints;

class RpcLatencyInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit RpcLatencyInterceptor(Histogram* histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      histogram_->ObserveSince(start_);
    }
    methods->Proceed();
  }

 private:
  Histogram* histogram_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

RpcLatencyInterceptorFactory::RpcLatencyInterceptorFactory(
    MetricsRegistry* metrics) {
  // kvpool.pb.h is linked in, so the generated pool knows the service.
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "kvpool.rpc.MasterService");
  if (service == nullptr) return;  // never: the proto is compiled in
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string& name = service->method(i)->name();
    by_method_["/" + service->full_name() + "/" + name] =
        &metrics->GetHistogram("kvpool_master_rpc_duration_seconds",
                               "method=\"" + name + "\"",
                               LatencyBucketsSeconds(),
                               "master RPC handling time, from the request's "
                               "metadata to the reply's status");
  }
}

grpc::experimental::Interceptor*
RpcLatencyInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  auto it = by_method_.find(std::string_view(info->method()));
  if (it == by_method_.end()) return nullptr;  // not a MasterService method
  // The interceptor is made when the call arrives, so its construction time
  // is the call's start.
  return new RpcLatencyInterceptor(it->second);
}

}  // namespace kvpool
