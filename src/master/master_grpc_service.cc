#include "master/master_grpc_service.h"

#include <algorithm>
#include <optional>
#include <string>

#include "rpc/request_limits.h"

namespace kvpool {

namespace {
// Batches are bounded so one request cannot pin the master for long
// (rpc/request_limits.h; the bytes of a request are bounded by gRPC's max
// receive message size, before it is parsed).
constexpr int kMaxBatch = kMaxBatchItems;

// The message names kvpool's code: MasterClient answers INVALID_PARAMS.
grpc::Status TooLarge() {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "INVALID_PARAMS: batch larger than the master's limit "
                      "of " +
                          std::to_string(kMaxBatch) + " items per call");
}

// The code of a batch item whose own handler refused it (a credential that
// went stale mid-batch, say): never 0, since the item was not run.
int32_t RefusedItemCode(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return ToInt(ErrorCode::ILLEGAL_CLIENT);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return ToInt(ErrorCode::INVALID_PARAMS);
    case grpc::StatusCode::UNIMPLEMENTED:
      return ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
    default:
      return ToInt(ErrorCode::INTERNAL_ERROR);
  }
}
}  // namespace

void ToProto(const ReplicaDesc& d, const CapGrant& g,
             rpc::ReplicaDescriptor* out) {
  out->set_kind(d.kind == ReplicaKind::kMemory ? rpc::MEMORY : rpc::LOCAL_DISK);
  out->set_status(d.status == ReplicaStatus::kComplete ? rpc::COMPLETE
                                                       : rpc::PROCESSING);
  if (d.kind == ReplicaKind::kLocalDisk && d.holder) {
    out->set_disk_node_id(d.holder->node_id);
    out->set_disk_data_endpoint(d.holder->data_endpoint);
    if (g.disk_ops != 0 && d.holder->cap_key && g.key) {
      out->set_disk_capability(
          d.holder->cap_key->SignKey(g.tenant ? *g.tenant : std::string(),
                                     *g.key, g.disk_ops, g.expiry_ms, 0));
    }
  }
  if (d.kind == ReplicaKind::kMemory && d.segment) {
    auto* m = out->mutable_memory();
    m->set_segment_id(d.segment->id);
    m->set_offset(d.offset);
    m->set_length(d.length);
    m->set_node_id(d.segment->node_id);
    m->set_host_id(d.segment->host_id);
    m->set_shm_path(d.segment->shm_path);
    m->set_data_endpoint(d.segment->data_endpoint);
    m->set_segment_size(d.segment->capacity);
    if (g.memory_ops != 0 && d.segment->cap_key) {
      // A write token carries its grant's write generation, so the node can
      // refuse it once a newer grant has written the range; read tokens 0.
      const uint64_t generation =
          (g.memory_ops & cap::kOpWrite) != 0 ? d.write_generation : 0;
      m->set_capability(d.segment->cap_key->SignRange(d.segment->id, d.offset,
                                                      d.length, g.memory_ops,
                                                      g.expiry_ms, generation));
    }
  }
}

// Short-lived: a revoked or discarded put's range is held past it (a late
// write is refused, never lands on the next owner's bytes).
CapGrant WriteGrant(const MasterService& svc, uint64_t size) {
  return CapGrant{cap::kOpWrite, 0,
                  cap::WallNowMs() + svc.WriteGrantTtlMs(size), nullptr,
                  nullptr};
}

grpc::Status MasterGrpcService::NotServing() const {
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      "kvpool-master not serving: " + gate_->NotServingReason());
}

bool MasterGrpcService::StampEpoch(uint64_t known, uint64_t* epoch) const {
  if (gate_ == nullptr) {
    *epoch = 0;
    return true;
  }
  *epoch = gate_->ServingEpoch();
  if (*epoch != 0 && known > *epoch) {
    gate_->SupersededBy(known);
    *epoch = 0;
  }
  return *epoch != 0;
}

grpc::Status MasterGrpcService::MountSegment(
    grpc::ServerContext* ctx, const rpc::MountSegmentRequest* req,
    rpc::MountSegmentResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kMountSegment, *req); !auth.ok())
    return auth;
  uint64_t epoch = 0;
  if (!StampEpoch(req->known_epoch(), &epoch)) return NotServing();
  resp->set_epoch(epoch);
  SegmentInfo info;
  info.node_id = req->node_id();
  info.host_id = req->host_id();
  info.kind = req->kind() == rpc::PREFETCH_BUFFER ? SegmentKind::kPrefetchBuffer
                                                  : SegmentKind::kMain;
  info.capacity = req->size();
  info.shm_path = req->shm_path();
  info.data_endpoint = req->data_endpoint();
  // An older master ignores the field (and keeps promotions on the
  // heartbeat); the emulation does the same.
  auto r = svc_->MountSegment(
      std::move(info), req->ssd_enabled(),
      req->pulls_promotions() && !svc_->emulating_pre_prefetch(),
      req->remount(),
      req->keeps_dram_directory() && !svc_->emulating_pre_prefetch(),
      req->opens_when_served() && !svc_->emulating_pre_prefetch());
  resp->set_error_code(ToInt(r.code()));
  if (r.ok()) {
    resp->set_segment_id(r.value());
    if (auto seg = svc_->segments().Info(r.value()); seg && seg->cap_key) {
      resp->set_capability_key(seg->cap_key->raw());
    }
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::MountExtraSegment(
    grpc::ServerContext* ctx, const rpc::MountExtraSegmentRequest* req,
    rpc::MountSegmentResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kMountExtraSegment, *req);
      !auth.ok())
    return auth;
  // A master from before prefetch is older than this RPC too.
  if (svc_->emulating_pre_prefetch()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "MountExtraSegment");
  }
  if (req->open_segment_id() != 0) {
    const Status s =
        req->open_segment_id() > UINT32_MAX
            ? Status(ErrorCode::SEGMENT_NOT_FOUND, "no such segment")
            : svc_->OpenExtraSegment(
                  req->node_id(),
                  static_cast<uint32_t>(req->open_segment_id()));
    resp->set_error_code(ToInt(s.code()));
    if (s.ok()) resp->set_segment_id(req->open_segment_id());
    return grpc::Status::OK;
  }
  auto r = svc_->MountExtraSegment(req->node_id(), req->size(), req->shm_path(),
                                   req->remount());
  resp->set_error_code(ToInt(r.code()));
  // No key: the segment is signed with the node's, which the node has.
  if (r.ok()) resp->set_segment_id(r.value());
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::UnmountSegment(
    grpc::ServerContext* ctx, const rpc::UnmountSegmentRequest* req,
    rpc::UnmountSegmentResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kUnmountSegment, *req); !auth.ok())
    return auth;
  if (req->segment_id() > UINT32_MAX) {
    resp->set_error_code(ToInt(ErrorCode::SEGMENT_NOT_FOUND));
    return grpc::Status::OK;
  }
  resp->set_error_code(
      ToInt(svc_->UnmountSegment(req->node_id(),
                                 static_cast<uint32_t>(req->segment_id()))
                .code()));
  return grpc::Status::OK;
}

namespace {
void ToProto(const PromotionTaskMsg& t, rpc::PromotionTask* p) {
  p->set_tenant(t.tenant);
  p->set_key(t.key);
  p->set_size(t.size);
  p->set_task_id(t.task_id);
  p->set_trigger_source(static_cast<rpc::TriggerSource>(t.source));
  p->set_from_prefetch(t.from_prefetch);
  p->set_deadline_in_ms(t.deadline_in_ms);
}
}  // namespace

grpc::Status MasterGrpcService::Heartbeat(grpc::ServerContext* ctx,
                                          const rpc::HeartbeatRequest* req,
                                          rpc::HeartbeatResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kHeartbeat, *req); !auth.ok())
    return auth;
  NodeTasks tasks;
  // Bounded so a shutdown or a lost client never pins a server thread long.
  int64_t wait_ms = std::min<int64_t>(req->wait_ms(), 5000);
  uint64_t epoch = 0;
  if (!StampEpoch(req->known_epoch(), &epoch)) return NotServing();
  Status s =
      svc_->Heartbeat(req->node_id(), wait_ms, req->max_offload_tasks(), &tasks,
                      req->dram_acked_seq(),
                      req->has_max_promotion_tasks()
                          ? std::optional<size_t>(req->max_promotion_tasks())
                          : std::nullopt);
  // Tasks a master hands over once its lease may have ended are never
  // delivered (the node would refuse them anyway, by their epoch).
  if (!StampEpoch(req->known_epoch(), &epoch)) return NotServing();
  resp->set_epoch(epoch);
  resp->set_error_code(ToInt(s.code()));
  for (const auto& e : tasks.dram_events) {
    auto* o = resp->add_dram_events();
    o->set_seq(e.seq);
    o->set_placed(e.placed);
    o->set_segment_id(e.segment);
    o->set_offset(e.offset);
    if (e.disk_drop) {
      o->set_disk_drop(true);
      o->set_tenant(e.tenant);
      o->set_key(e.key);
      o->set_version(e.version);
    } else if (e.placed) {
      o->set_size(e.size);
      o->set_tenant(e.tenant);
      o->set_key(e.key);
      o->set_version(e.version);
    }
  }
  for (const auto& d : tasks.disk_drops) {
    auto* o = resp->add_disk_drops();
    o->set_tenant(d.tenant);
    o->set_key(d.key);
  }
  for (const auto& t : tasks.offloads) {
    auto* o = resp->add_offload_tasks();
    o->set_tenant(t.tenant);
    o->set_key(t.key);
    o->set_segment_id(t.segment);
    o->set_offset(t.offset);
    o->set_size(t.size);
    o->set_version(t.version);
  }
  for (const auto& t : tasks.promotions)
    ToProto(t, resp->add_promotion_tasks());
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::PullPromotionTasks(
    grpc::ServerContext* ctx, const rpc::PullPromotionTasksRequest* req,
    rpc::PullPromotionTasksResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kPullPromotionTasks, *req);
      !auth.ok())
    return auth;
  if (svc_->emulating_pre_prefetch()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "PullPromotionTasks");
  }
  uint64_t epoch = 0;
  if (!StampEpoch(req->known_epoch(), &epoch)) return NotServing();
  resp->set_epoch(epoch);
  std::vector<PromotionTaskMsg> tasks;
  // Bounded: one pull never takes more than a worker's batch.
  size_t max = std::min<size_t>(req->max_tasks(), 1024);
  Status s = svc_->PullPromotionTasks(req->node_id(), max, &tasks);
  resp->set_error_code(ToInt(s.code()));
  for (const auto& t : tasks) ToProto(t, resp->add_tasks());
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::NotifyOffload(
    grpc::ServerContext* ctx, const rpc::NotifyOffloadRequest* req,
    rpc::NotifyOffloadResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kNotifyOffload, *req); !auth.ok())
    return auth;
  if (req->results_size() > kMaxBatch) return TooLarge();
  std::vector<OffloadResultIn> in;
  in.reserve(req->results_size());
  for (const auto& r : req->results()) {
    in.push_back(OffloadResultIn{r.tenant(), r.key(), r.version(),
                                 ErrorCodeFromInt(r.error_code())});
  }
  for (ErrorCode c : svc_->NotifyOffload(req->node_id(), in))
    resp->add_error_codes(ToInt(c));
  return grpc::Status::OK;
}

namespace {
std::vector<DiskObjectIn> FromProto(
    const google::protobuf::RepeatedPtrField<rpc::DiskObject>& objects) {
  std::vector<DiskObjectIn> in;
  in.reserve(objects.size());
  for (const auto& o : objects)
    in.push_back(DiskObjectIn{o.tenant(), o.key(), o.size(), o.version()});
  return in;
}
}  // namespace

grpc::Status MasterGrpcService::RegisterMemoryObjects(
    grpc::ServerContext* ctx, const rpc::RegisterMemoryObjectsRequest* req,
    rpc::RegisterMemoryObjectsResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kRegisterMemoryObjects, *req);
      !auth.ok())
    return auth;
  if (req->objects_size() > kMaxBatch) return TooLarge();
  if (req->segment_id() > UINT32_MAX) {
    resp->set_error_code(ToInt(ErrorCode::SEGMENT_NOT_FOUND));
    return grpc::Status::OK;
  }
  std::vector<MemoryObjectIn> in;
  in.reserve(req->objects_size());
  for (const auto& o : req->objects()) {
    in.push_back(
        MemoryObjectIn{o.tenant(), o.key(), o.offset(), o.size(), o.version()});
  }
  auto r = svc_->RegisterMemoryObjects(req->node_id(),
                                       static_cast<uint32_t>(req->segment_id()),
                                       in, req->done());
  resp->set_error_code(ToInt(r.code()));
  if (r.ok()) {
    for (ErrorCode c : r.value()) resp->add_error_codes(ToInt(c));
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::RegisterDiskObjects(
    grpc::ServerContext* ctx, const rpc::RegisterDiskObjectsRequest* req,
    rpc::RegisterDiskObjectsResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kRegisterDiskObjects, *req);
      !auth.ok())
    return auth;
  if (req->objects_size() > kMaxBatch) return TooLarge();
  for (ErrorCode c :
       svc_->RegisterDiskObjects(req->node_id(), FromProto(req->objects()))) {
    resp->add_error_codes(ToInt(c));
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::RemoveDiskReplicas(
    grpc::ServerContext* ctx, const rpc::RemoveDiskReplicasRequest* req,
    rpc::RemoveDiskReplicasResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kRemoveDiskReplicas, *req);
      !auth.ok())
    return auth;
  if (req->objects_size() > kMaxBatch) return TooLarge();
  for (ErrorCode c :
       svc_->RemoveDiskReplicas(req->node_id(), FromProto(req->objects()))) {
    resp->add_error_codes(ToInt(c));
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::PromotionAllocStart(
    grpc::ServerContext* ctx, const rpc::PromotionAllocStartRequest* req,
    rpc::PromotionAllocStartResponse* resp) {
  return PromotionAllocStartItem(ctx, *req, {}, resp);
}

grpc::Status MasterGrpcService::PromotionAllocStartItem(
    grpc::ServerContext* ctx, const rpc::PromotionAllocStartRequest& req,
    std::string_view batch_token, rpc::PromotionAllocStartResponse* resp) {
  if (auto auth =
          Authorize(ctx, RpcMethod::kPromotionAllocStart, req, batch_token);
      !auth.ok())
    return auth;
  auto r = svc_->PromotionAllocStart(req.node_id(), req.tenant(), req.key(),
                                     req.size(), req.task_id());
  resp->set_error_code(ToInt(r.code()));
  if (r.ok()) {
    ToProto(r.value(), WriteGrant(*svc_, r.value().length),
            resp->mutable_replica());
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchPromotionAllocStart(
    grpc::ServerContext* ctx, const rpc::BatchPromotionAllocStartRequest* req,
    rpc::BatchPromotionAllocStartResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchPromotionAllocStart, *req);
      !auth.ok())
    return auth;
  if (svc_->emulating_pre_prefetch()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "BatchPromotionAllocStart");
  }
  if (req->items_size() > kMaxBatch) return TooLarge();
  for (const auto& item : req->items()) {
    rpc::PromotionAllocStartResponse* out = resp->add_items();
    if (grpc::Status s =
            PromotionAllocStartItem(ctx, item, req->auth_token(), out);
        !s.ok()) {
      out->Clear();
      out->set_error_code(RefusedItemCode(s));
    }
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchPromotionNotify(
    grpc::ServerContext* ctx, const rpc::BatchPromotionNotifyRequest* req,
    rpc::BatchPromotionNotifyResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchPromotionNotify, *req);
      !auth.ok())
    return auth;
  if (svc_->emulating_pre_prefetch()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "BatchPromotionNotify");
  }
  if (req->items_size() > kMaxBatch) return TooLarge();
  for (const auto& item : req->items()) {
    rpc::KeyStatus st;
    grpc::Status s = NotifyPromotionItem(ctx, item, req->auth_token(), &st);
    resp->add_error_codes(s.ok() ? st.error_code() : RefusedItemCode(s));
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchPrefetchToMemory(
    grpc::ServerContext* ctx, const rpc::BatchPrefetchToMemoryRequest* req,
    rpc::BatchPrefetchToMemoryResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchPrefetchToMemory, *req);
      !auth.ok())
    return auth;
  if (svc_->emulating_pre_prefetch()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "BatchPrefetchToMemory");
  }
  if (req->keys_size() > kMaxBatch) return TooLarge();
  std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  if (req->deadline_in_ms() < 0) {
    resp->set_error_code(ToInt(ErrorCode::INVALID_PARAMS));
    return grpc::Status::OK;
  }
  auto r =
      svc_->BatchPrefetchToMemory(req->tenant(), keys, req->deadline_in_ms());
  resp->set_error_code(ToInt(r.code()));
  if (r.ok()) {
    for (auto st : r.value()) {
      resp->add_statuses(
          static_cast<rpc::PrefetchStatus>(static_cast<int>(st)));
    }
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::RegisterPrefetchTask(
    grpc::ServerContext* ctx, const rpc::RegisterPrefetchTaskRequest* req,
    rpc::RegisterPrefetchTaskResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kRegisterPrefetchTask, *req);
      !auth.ok())
    return auth;
  if (svc_->emulating_pre_prefetch()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "RegisterPrefetchTask");
  }
  if (req->keys_size() > kMaxBatch) return TooLarge();
  std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  for (const auto& r :
       svc_->RegisterPrefetchTask(req->node_id(), req->tenant(), keys)) {
    auto* o = resp->add_results();
    o->set_error_code(ToInt(r.code));
    o->set_task_id(r.task_id);
    o->set_size(r.size);
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::NotifyPromotion(
    grpc::ServerContext* ctx, const rpc::PromotionNotifyRequest* req,
    rpc::KeyStatus* resp) {
  return NotifyPromotionItem(ctx, *req, {}, resp);
}

grpc::Status MasterGrpcService::NotifyPromotionItem(
    grpc::ServerContext* ctx, const rpc::PromotionNotifyRequest& req,
    std::string_view batch_token, rpc::KeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kNotifyPromotion, req, batch_token);
      !auth.ok())
    return auth;
  resp->set_error_code(
      ToInt(svc_->NotifyPromotion(req.node_id(), req.tenant(), req.key(),
                                  req.task_id(), req.success(), req.expired())
                .code()));
  return grpc::Status::OK;
}

void MasterGrpcService::DoPutStart(const rpc::PutStartRequest& req,
                                   rpc::PutStartResponse* resp,
                                   std::string_view batch_client) {
  PutOptions opts;
  opts.replica_num =
      req.config().replica_num() == 0 ? 1 : int(req.config().replica_num());
  opts.preferred_node = req.config().preferred_segment();
  opts.soft_pin = req.config().with_soft_pin();
  opts.soft_pin_ttl_ms = req.config().soft_pin_ttl_ms();
  opts.preferred_nodes.assign(req.config().preferred_segments().begin(),
                              req.config().preferred_segments().end());
  opts.hard_pin = req.config().with_hard_pin();
  opts.upsert = req.upsert();
  // Bounded: a client names the few nodes its write just failed on.
  for (int i = 0; i < req.excluded_nodes_size() && i < 64; ++i)
    opts.excluded_nodes.push_back(req.excluded_nodes(i));
  opts.client = ClientId::FromBytes(req.client_id().empty() ? batch_client
                                                            : req.client_id());
  auto r = svc_->PutStart(req.tenant(), req.key(), req.size(), opts);
  resp->set_error_code(ToInt(r.code()));
  if (!r.ok()) resp->set_error_message(r.status().message());
  if (r.ok()) {
    const CapGrant g = WriteGrant(*svc_, req.size());
    for (const auto& d : r.value()) ToProto(d, g, resp->add_replicas());
  }
}

grpc::Status MasterGrpcService::PutStart(grpc::ServerContext* ctx,
                                         const rpc::PutStartRequest* req,
                                         rpc::PutStartResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kPutStart, *req); !auth.ok())
    return auth;
  DoPutStart(*req, resp);
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchPutStart(
    grpc::ServerContext* ctx, const rpc::BatchPutStartRequest* req,
    rpc::BatchPutStartResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchPutStart, *req); !auth.ok())
    return auth;
  if (req->items_size() > kMaxBatch) return TooLarge();
  for (const auto& item : req->items())
    DoPutStart(item, resp->add_items(), req->client_id());
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::PutEnd(grpc::ServerContext* ctx,
                                       const rpc::KeyRequest* req,
                                       rpc::KeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kPutEnd, *req); !auth.ok())
    return auth;
  resp->set_error_code(ToInt(svc_->PutEnd(req->tenant(), req->key()).code()));
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchPutEnd(grpc::ServerContext* ctx,
                                            const rpc::BatchKeyRequest* req,
                                            rpc::BatchKeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchPutEnd, *req); !auth.ok())
    return auth;
  if (req->keys_size() > kMaxBatch) return TooLarge();
  std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  for (const Status& s : svc_->BatchPutEnd(req->tenant(), keys))
    resp->add_error_codes(ToInt(s.code()));
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::PutRevoke(grpc::ServerContext* ctx,
                                          const rpc::KeyRequest* req,
                                          rpc::KeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kPutRevoke, *req); !auth.ok())
    return auth;
  resp->set_error_code(
      ToInt(svc_->PutRevoke(req->tenant(), req->key()).code()));
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchPutRevoke(grpc::ServerContext* ctx,
                                               const rpc::BatchKeyRequest* req,
                                               rpc::BatchKeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchPutRevoke, *req); !auth.ok())
    return auth;
  if (req->keys_size() > kMaxBatch) return TooLarge();
  for (const auto& k : req->keys()) {
    resp->add_error_codes(ToInt(svc_->PutRevoke(req->tenant(), k).code()));
  }
  return grpc::Status::OK;
}

void MasterGrpcService::DoGet(const std::string& tenant, const std::string& key,
                              rpc::GetReplicaListResponse* resp) {
  auto r = svc_->GetReplicaList(tenant, key);
  resp->set_error_code(ToInt(r.code()));
  resp->set_master_incarnation(svc_->incarnation());
  if (!r.ok()) return;
  resp->set_size(r->size);
  resp->set_lease_ttl_ms(r->lease_ttl_ms);
  // Good for as long as the lease: the master keeps the bytes that long.
  const CapGrant g{cap::kOpRead, cap::kOpSsdRead | cap::kOpPrefetch,
                   cap::WallNowMs() + r->lease_ttl_ms, &tenant, &key};
  for (const auto& d : r->replicas) ToProto(d, g, resp->add_replicas());
}

grpc::Status MasterGrpcService::GetReplicaList(
    grpc::ServerContext* ctx, const rpc::KeyRequest* req,
    rpc::GetReplicaListResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kGetReplicaList, *req); !auth.ok())
    return auth;
  DoGet(req->tenant(), req->key(), resp);
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchGetReplicaList(
    grpc::ServerContext* ctx, const rpc::BatchKeyRequest* req,
    rpc::BatchGetReplicaListResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchGetReplicaList, *req);
      !auth.ok())
    return auth;
  if (req->keys_size() > kMaxBatch) return TooLarge();
  resp->set_master_incarnation(svc_->incarnation());
  for (const auto& k : req->keys()) DoGet(req->tenant(), k, resp->add_items());
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::ExistKey(grpc::ServerContext* ctx,
                                         const rpc::ExistKeyRequest* req,
                                         rpc::ExistKeyResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kExistKey, *req); !auth.ok())
    return auth;
  if (req->keys_size() > kMaxBatch) return TooLarge();
  for (const auto& k : req->keys()) {
    resp->add_error_codes(
        ToInt(svc_->ExistKey(req->tenant(), k, !req->no_lease())));
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchExistKey(grpc::ServerContext* ctx,
                                              const rpc::ExistKeyRequest* req,
                                              rpc::ExistKeyResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchExistKey, *req); !auth.ok())
    return auth;
  return ExistKey(ctx, req, resp);
}

grpc::Status MasterGrpcService::Remove(grpc::ServerContext* ctx,
                                       const rpc::RemoveRequest* req,
                                       rpc::KeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kRemove, *req); !auth.ok())
    return auth;
  resp->set_error_code(
      ToInt(svc_->Remove(req->tenant(), req->key(), req->force()).code()));
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::BatchRemove(grpc::ServerContext* ctx,
                                            const rpc::BatchRemoveRequest* req,
                                            rpc::BatchKeyStatus* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kBatchRemove, *req); !auth.ok())
    return auth;
  if (req->keys_size() > kMaxBatch) return TooLarge();
  for (const auto& key : req->keys()) {
    resp->add_error_codes(
        ToInt(svc_->Remove(req->tenant(), key, req->force()).code()));
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::RemoveAll(grpc::ServerContext* ctx,
                                          const rpc::RemoveAllRequest* req,
                                          rpc::RemoveAllResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kRemoveAll, *req); !auth.ok())
    return auth;
  auto r =
      req->key_regex().empty()
          ? svc_->RemoveAll(req->tenant(), req->force())
          : svc_->RemoveByRegex(req->tenant(), req->key_regex(), req->force());
  resp->set_error_code(ToInt(r.code()));
  if (r.ok()) resp->set_removed(*r);
  return grpc::Status::OK;
}

// Request and reply of one tier lookup on one arena: a batch of 128 keys is
// otherwise some 500 small heap allocations (key strings, items, replica
// descriptors) made and freed per call.
class MasterGrpcService::ArenaAllocator final
    : public grpc::MessageAllocator<rpc::BatchKeyRequest,
                                    rpc::BatchQueryReadOnlyResponse> {
 public:
  grpc::MessageHolder<rpc::BatchKeyRequest, rpc::BatchQueryReadOnlyResponse>*
  AllocateMessages() override {
    return new Holder();
  }

 private:
  class Holder final
      : public grpc::MessageHolder<rpc::BatchKeyRequest,
                                   rpc::BatchQueryReadOnlyResponse> {
   public:
    Holder() : arena_(Options()) {
      set_request(google::protobuf::Arena::CreateMessage<rpc::BatchKeyRequest>(
          &arena_));
      set_response(google::protobuf::Arena::CreateMessage<
                   rpc::BatchQueryReadOnlyResponse>(&arena_));
    }
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options() {
      google::protobuf::ArenaOptions o;
      o.start_block_size = 32 << 10;
      o.max_block_size = 1 << 20;
      return o;
    }
    google::protobuf::Arena arena_;
  };
};

MasterGrpcService::MasterGrpcService(MasterService* service)
    : svc_(service),
      query_keys_(&service->metrics().GetCounter(
          "kvpool_master_query_keys_total", "", "keys looked up read-only")),
      query_allocator_(std::make_unique<ArenaAllocator>()) {
  SetMessageAllocatorFor_BatchQueryReadOnly(query_allocator_.get());
}

MasterGrpcService::~MasterGrpcService() = default;

grpc::ServerUnaryReactor* MasterGrpcService::BatchQueryReadOnly(
    grpc::CallbackServerContext* ctx, const rpc::BatchKeyRequest* req,
    rpc::BatchQueryReadOnlyResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (auto auth = Authorize(ctx, RpcMethod::kBatchQueryReadOnly, *req);
      !auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  if (req->keys_size() > kMaxBatch) {
    reactor->Finish(TooLarge());
    return reactor;
  }
  query_keys_->Inc(static_cast<uint64_t>(req->keys_size()));
  BatchQueryResult batch;
  batch.replicas.reserve(static_cast<size_t>(req->keys_size()));
  svc_->QueryReadOnlyBatch(req->tenant(), req->keys(), &batch);
  resp->mutable_items()->Reserve(req->keys_size());
  std::vector<uint32_t> described;  // segment ids already in the table
  const int64_t prefetch_expiry =
      cap::WallNowMs() + svc_->config().default_kv_lease_ttl;
  for (size_t qi = 0; qi < batch.items.size(); ++qi) {
    const QueryItem& q = batch.items[qi];
    auto* item = resp->add_items();
    item->set_error_code(ToInt(q.code));
    item->set_size(q.size);
    item->set_lease_remaining_ms(q.lease_remaining_ms);
    for (uint32_t i = 0; i < q.num_replicas; ++i) {
      const Replica& r = batch.replicas[q.first_replica + i];
      auto* d = item->add_replicas();
      d->set_kind(r.kind == ReplicaKind::kMemory ? rpc::MEMORY
                                                 : rpc::LOCAL_DISK);
      d->set_status(r.status == ReplicaStatus::kComplete ? rpc::COMPLETE
                                                         : rpc::PROCESSING);
      if (r.kind != ReplicaKind::kMemory) {
        if (auto holder = svc_->nodes().Info(r.segment)) {
          d->set_disk_node_id(holder->node_id);
          d->set_disk_data_endpoint(holder->data_endpoint);
          // A lookup grants no lease, so no read: only asking the holder
          // to promote the key (the client-side prefetcher's use).
          if (holder->cap_key) {
            d->set_disk_capability(holder->cap_key->SignKey(
                req->tenant(), req->keys(static_cast<int>(qi)),
                cap::kOpPrefetch, prefetch_expiry, 0));
          }
        }
        continue;
      }
      auto* m = d->mutable_memory();
      m->set_segment_id(r.segment);
      m->set_offset(r.offset);
      m->set_length(q.size);
      if (std::find(described.begin(), described.end(), r.segment) !=
          described.end())
        continue;
      described.push_back(r.segment);
      if (auto info = svc_->segments().Info(r.segment)) {
        auto* seg = resp->add_segments();
        seg->set_segment_id(info->id);
        seg->set_node_id(info->node_id);
        seg->set_host_id(info->host_id);
        seg->set_shm_path(info->shm_path);
        seg->set_data_endpoint(info->data_endpoint);
        seg->set_segment_size(info->capacity);
      }
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status MasterGrpcService::GetClusterStats(
    grpc::ServerContext* ctx, const rpc::ClusterStatsRequest* req,
    rpc::ClusterStatsResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kGetClusterStats, *req); !auth.ok())
    return auth;
  MasterStats s = svc_->Stats();
  resp->set_objects(s.objects);
  resp->set_memory_replicas(s.memory_replicas);
  resp->set_evictions(s.evicted_objects);
  for (const auto& seg : s.segments) {
    auto* o = resp->add_segments();
    o->set_segment_id(seg.info.id);
    o->set_node_id(seg.info.node_id);
    o->set_kind(seg.info.kind == SegmentKind::kMain ? rpc::MAIN
                                                    : rpc::PREFETCH_BUFFER);
    o->set_capacity(seg.info.capacity);
    o->set_used(seg.used);
    o->set_data_endpoint(seg.info.data_endpoint);
  }
  return grpc::Status::OK;
}

grpc::Status MasterGrpcService::ClientPing(grpc::ServerContext* ctx,
                                           const rpc::ClientPingRequest* req,
                                           rpc::ClientPingResponse* resp) {
  if (auto auth = Authorize(ctx, RpcMethod::kClientPing, *req); !auth.ok())
    return auth;
  auto r = svc_->ClientPing(ClientId::FromBytes(req->client_id()));
  resp->set_error_code(ToInt(r.code()));
  if (r.ok()) resp->set_client_ttl_ms(static_cast<uint64_t>(r.value()));
  return grpc::Status::OK;
}

}  // namespace kvpool
