// gRPC face of MasterService: converts protobuf messages to MasterService
// calls and back, once the caller's credential allows the call
// (master_auth.h). Holds no state of its own beyond that check.
#ifndef KVPOOL_MASTER_MASTER_GRPC_SERVICE_H_
#define KVPOOL_MASTER_MASTER_GRPC_SERVICE_H_

#include <memory>

#include "kvpool.grpc.pb.h"
#include "master/master_auth.h"
#include "master/master_service.h"
#include "master/serving_gate.h"

namespace kvpool {

// What the capability tokens of a reply grant: the ops on MEMORY replicas'
// ranges and on LOCAL_DISK replicas' key (0 = no token), until when (wall
// ms), and for disk tokens the object's tenant and key.
struct CapGrant {
  uint32_t memory_ops = 0;
  uint32_t disk_ops = 0;
  int64_t expiry_ms = 0;
  const std::string* tenant = nullptr;
  const std::string* key = nullptr;
};

// Fills a protobuf replica descriptor, signing the tokens `g` names with
// the holder's key.
void ToProto(const ReplicaDesc& d, const CapGrant& g,
             rpc::ReplicaDescriptor* out);

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

  // Before serving: null (the default) lets every call through unchecked.
  void set_authorizer(std::unique_ptr<RpcAuthorizer> authorizer) {
    auth_ = std::move(authorizer);
  }
  // Null when authentication is off.
  RpcAuthorizer* authorizer() const { return auth_.get(); }
  // Before serving: null (the default) serves every call under epoch 0.
  void set_gate(std::shared_ptr<ServingGate> gate) { gate_ = std::move(gate); }

  grpc::Status MountSegment(grpc::ServerContext*,
                            const rpc::MountSegmentRequest*,
                            rpc::MountSegmentResponse*) override;
  grpc::Status UnmountSegment(grpc::ServerContext*,
                              const rpc::UnmountSegmentRequest*,
                              rpc::UnmountSegmentResponse*) override;
  grpc::Status MountExtraSegment(grpc::ServerContext*,
                                 const rpc::MountExtraSegmentRequest*,
                                 rpc::MountSegmentResponse*) override;
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
  grpc::Status BatchRemove(grpc::ServerContext*, const rpc::BatchRemoveRequest*,
                           rpc::BatchKeyStatus*) override;
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
  grpc::Status ClientPing(grpc::ServerContext*, const rpc::ClientPingRequest*,
                          rpc::ClientPingResponse*) override;

 private:
  // `batch_client`: the batch's client id, for an item without its own.
  void DoPutStart(const rpc::PutStartRequest& req, rpc::PutStartResponse* resp,
                  std::string_view batch_client = {});
  void DoGet(const std::string& tenant, const std::string& key,
             rpc::GetReplicaListResponse* resp);
  // The item handlers of BatchPromotionAllocStart and BatchPromotionNotify:
  // an item is authorized with the batch's token (`batch_token`, empty when
  // it came in the metadata).
  grpc::Status PromotionAllocStartItem(
      grpc::ServerContext* ctx, const rpc::PromotionAllocStartRequest& req,
      std::string_view batch_token, rpc::PromotionAllocStartResponse* resp);
  grpc::Status NotifyPromotionItem(grpc::ServerContext* ctx,
                                   const rpc::PromotionNotifyRequest& req,
                                   std::string_view batch_token,
                                   rpc::KeyStatus* resp);
  // Each handler's first statement; one branch when authentication is off.
  // `batch_token`: see PromotionAllocStartItem.
  template <typename Req>
  grpc::Status Authorize(const grpc::ServerContextBase* ctx, RpcMethod m,
                         const Req& req,
                         std::string_view batch_token = {}) const {
    // A standby, or a leader unsure of its lease, answers nothing at all:
    // clients take UNAVAILABLE as "find the leader again".
    if (gate_ != nullptr) {
      const uint64_t epoch = gate_->ServingEpoch();
      if (epoch == 0) return NotServing();
      // Fencing (docs/ha.md): the reply says which leader sent it. Sent
      // before the handler runs, so a reply never leaves without it.
      const_cast<grpc::ServerContextBase*>(ctx)->AddInitialMetadata(
          kEpochHeader, std::to_string(epoch));
    }
    return auth_ == nullptr ? grpc::Status::OK
                            : auth_->Check(*ctx, m, req, batch_token);
  }
  grpc::Status NotServing() const;
  // The epoch to stamp on a reply to a node, checked once more as the reply
  // leaves (a long poll may outlast the lease): false = answer NotServing().
  // `known` is the newest epoch the node has seen: newer than ours means
  // this master is stale.
  bool StampEpoch(uint64_t known, uint64_t* epoch) const;
  std::shared_ptr<ServingGate> gate_;
  MasterService* svc_;
  Counter* query_keys_;
  class ArenaAllocator;
  std::unique_ptr<ArenaAllocator> query_allocator_;
  std::unique_ptr<RpcAuthorizer> auth_;
};

}  // namespace kvpool

#endif  // KVPOOL_MASTER_MASTER_GRPC_SERVICE_H_
