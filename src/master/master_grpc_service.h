// gRPC face of MasterService: converts protobuf messages to MasterService
// calls and back. Holds no state of its own.
#ifndef KVPOOL_MASTER_MASTER_GRPC_SERVICE_H_
#define KVPOOL_MASTER_MASTER_GRPC_SERVICE_H_

#include <memory>

#include "kvpool.grpc.pb.h"
#include "master/master_service.h"

namespace kvpool {

// Fills a protobuf replica descriptor (shared with the client side).
void ToProto(const ReplicaDesc& d, rpc::ReplicaDescriptor* out);

// The tier lookup (BatchQueryReadOnly) is the one hot read-only RPC a router
// calls per request: it runs on gRPC's callback API, inline on the thread
// that read the request, with request and reply on one arena. Every other
// method is an ordinary synchronous handler.
class MasterGrpcService final
    : public rpc::MasterService::WithCallbackMethod_BatchQueryReadOnly<
          rpc::MasterService::Service> {
 public:
  explicit MasterGrpcService(MasterService* service);
  ~MasterGrpcService() override;

  grpc::Status MountSegment(grpc::ServerContext*,
                            const rpc::MountSegmentRequest*,
                            rpc::MountSegmentResponse*) override;
  grpc::Status UnmountSegment(grpc::ServerContext*,
                              const rpc::UnmountSegmentRequest*,
                              rpc::UnmountSegmentResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const rpc::HeartbeatRequest*,
                         rpc::HeartbeatResponse*) override;
  grpc::Status BatchPromotionAllocStart(
      grpc::ServerContext*, const rpc::BatchPromotionAllocStartRequest*,
      rpc::BatchPromotionAllocStartResponse*) override;
  grpc::Status BatchPromotionNotify(
      grpc::ServerContext*, const rpc::BatchPromotionNotifyRequest*,
      rpc::BatchPromotionNotifyResponse*) override;
  grpc::Status PullPromotionTasks(grpc::ServerContext*,
                                  const rpc::PullPromotionTasksRequest*,
                                  rpc::PullPromotionTasksResponse*) override;
  grpc::Status PutStart(grpc::ServerContext*, const rpc::PutStartRequest*,
                        rpc::PutStartResponse*) override;
  grpc::Status BatchPutStart(grpc::ServerContext*,
                             const rpc::BatchPutStartRequest*,
                             rpc::BatchPutStartResponse*) override;
  grpc::Status PutEnd(grpc::ServerContext*, const rpc::KeyRequest*,
                      rpc::KeyStatus*) override;
  grpc::Status BatchPutEnd(grpc::ServerContext*, const rpc::BatchKeyRequest*,
                           rpc::BatchKeyStatus*) override;
  grpc::Status PutRevoke(grpc::ServerContext*, const rpc::KeyRequest*,
                         rpc::KeyStatus*) override;
  grpc::Status BatchPutRevoke(grpc::ServerContext*, const rpc::BatchKeyRequest*,
                              rpc::BatchKeyStatus*) override;
  grpc::Status GetReplicaList(grpc::ServerContext*, const rpc::KeyRequest*,
                              rpc::GetReplicaListResponse*) override;
  grpc::Status BatchGetReplicaList(grpc::ServerContext*,
                                   const rpc::BatchKeyRequest*,
                                   rpc::BatchGetReplicaListResponse*) override;
  grpc::Status ExistKey(grpc::ServerContext*, const rpc::ExistKeyRequest*,
                        rpc::ExistKeyResponse*) override;
  grpc::Status BatchExistKey(grpc::ServerContext*, const rpc::ExistKeyRequest*,
                             rpc::ExistKeyResponse*) override;
  grpc::Status Remove(grpc::ServerContext*, const rpc::RemoveRequest*,
                      rpc::KeyStatus*) override;
  grpc::Status RemoveAll(grpc::ServerContext*, const rpc::RemoveAllRequest*,
                         rpc::RemoveAllResponse*) override;
  grpc::ServerUnaryReactor* BatchQueryReadOnly(
      grpc::CallbackServerContext*, const rpc::BatchKeyRequest*,
      rpc::BatchQueryReadOnlyResponse*) override;
  grpc::Status GetClusterStats(grpc::ServerContext*,
                               const rpc::ClusterStatsRequest*,
                               rpc::ClusterStatsResponse*) override;
  grpc::Status NotifyOffload(grpc::ServerContext*,
                             const rpc::NotifyOffloadRequest*,
                             rpc::NotifyOffloadResponse*) override;
  grpc::Status RegisterMemoryObjects(
      grpc::ServerContext*, const rpc::RegisterMemoryObjectsRequest*,
      rpc::RegisterMemoryObjectsResponse*) override;
  grpc::Status RegisterDiskObjects(grpc::ServerContext*,
                                   const rpc::RegisterDiskObjectsRequest*,
                                   rpc::RegisterDiskObjectsResponse*) override;
  grpc::Status RemoveDiskReplicas(grpc::ServerContext*,
                                  const rpc::RemoveDiskReplicasRequest*,
                                  rpc::RemoveDiskReplicasResponse*) override;
  grpc::Status PromotionAllocStart(grpc::ServerContext*,
                                   const rpc::PromotionAllocStartRequest*,
                                   rpc::PromotionAllocStartResponse*) override;
  grpc::Status NotifyPromotion(grpc::ServerContext*,
                               const rpc::PromotionNotifyRequest*,
                               rpc::KeyStatus*) override;
  grpc::Status BatchPrefetchToMemory(
      grpc::ServerContext*, const rpc::BatchPrefetchToMemoryRequest*,
      rpc::BatchPrefetchToMemoryResponse*) override;
  grpc::Status RegisterPrefetchTask(
      grpc::ServerContext*, const rpc::RegisterPrefetchTaskRequest*,
      rpc::RegisterPrefetchTaskResponse*) override;

 private:
  void DoPutStart(const rpc::PutStartRequest& req, rpc::PutStartResponse* resp);
  void DoGet(const std::string& tenant, const std::string& key,
             rpc::GetReplicaListResponse* resp);
  MasterService* svc_;
  Counter* query_keys_;
  class ArenaAllocator;
  std::unique_ptr<ArenaAllocator> query_allocator_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_GRPC_SERVICE_H_
