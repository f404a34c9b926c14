// SsdTier's records as the master knows them: offered again at a remount
// (RegisterWithMaster), dropped when the master says so, and evicted when
// the disk fills up, each with the master's consent.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "node/ssd_tier.h"
#include "node/ssd_tier_internal.h"

namespace kvpool {

using ssd_tier_internal::Stub;

namespace {
constexpr size_t kRegisterChunk = 4096;
}  // namespace

namespace {
// The master refused this copy for good: the key was removed or replaced
// since, a newer value of it was lost, or the record is malformed. Any
// other refusal (the master does not know this node yet because it
// restarted meanwhile, or has no room for the tenant now) deletes nothing:
// the record is offered again at the next remount.
bool RefusedForGood(int code) {
  const ErrorCode c = ErrorCodeFromInt(code);
  return c == ErrorCode::OBJECT_NOT_FOUND ||
         c == ErrorCode::OBJECT_ALREADY_EXISTS ||
         c == ErrorCode::INVALID_PARAMS;
}
}  // namespace

void SsdTier::DropCopy(const std::string& tenant, const std::string& key,
                       uint64_t version) {
  Status s = storage_->RemoveIfVersion(tenant, key, version);
  if (s.ok() || s.code() == ErrorCode::OBJECT_NOT_FOUND) return;
  metrics_
      .GetCounter("kvpool_node_ssd_remove_failures_total", "",
                  "SSD copies dropped from the index but not marked dead on "
                  "disk")
      .Inc();
  spdlog::warn("node {}: SSD copy of {}/{} v{}: {}", node_id_, tenant, key,
               version, s.ToString());
}

void SsdTier::RegisterWithMaster() {
  std::vector<StoredObject> all = storage_->List();
  size_t dropped = 0, kept = 0;
  for (size_t start = 0; start < all.size(); start += kRegisterChunk) {
    size_t end = std::min(all.size(), start + kRegisterChunk);
    rpc::RegisterDiskObjectsRequest req;
    req.set_node_id(node_id_);
    for (size_t i = start; i < end; ++i) {
      auto* o = req.add_objects();
      o->set_tenant(all[i].tenant);
      o->set_key(all[i].key);
      o->set_size(all[i].size);
      o->set_version(all[i].object_version);
    }
    rpc::RegisterDiskObjectsResponse resp;
    if (Status s = master_->Call(&Stub::RegisterDiskObjects, req, &resp);
        !s.ok()) {
      spdlog::warn("node {}: re-registering SSD objects failed: {}", node_id_,
                   s.ToString());
      return;  // tried again at the next remount
    }
    for (size_t i = start; i < end && int(i - start) < resp.error_codes_size();
         ++i) {
      const int code = resp.error_codes(int(i - start));
      if (code == 0) continue;
      if (ErrorCodeFromInt(code) == ErrorCode::CLIENT_NOT_FOUND) {
        // A master that restarted after our mount: every copy stays, and
        // the remount it asks for offers them again.
        spdlog::warn(
            "node {}: the master does not know this node (it restarted?): "
            "SSD objects kept for the next remount",
            node_id_);
        return;
      }
      if (!RefusedForGood(code)) {
        ++kept;
        continue;
      }
      DropCopy(all[i].tenant, all[i].key, all[i].object_version);
      ++dropped;
    }
  }
  spdlog::info(
      "node {}: re-registered {} SSD objects ({} refused and dropped, {} "
      "refused for now and kept)",
      node_id_, all.size() - dropped - kept, dropped, kept);
  metrics_.GetCounter("kvpool_node_ssd_reregistered_total")
      .Inc(all.size() - dropped - kept);
}

void SsdTier::DropRecord(const std::string& tenant, const std::string& key,
                         uint64_t version) {
  const std::string& t = tenant.empty() ? std::string("default") : tenant;
  auto stored = storage_->LookupVersion(t, key);
  if (!stored.ok()) return;
  // A newer value's record (written after the master sent this) stays.
  if (version != 0 && stored.value() > version) return;
  if (storage_->RemoveIfVersion(t, key, stored.value()).ok())
    metrics_.GetCounter("kvpool_node_disk_drops_total").Inc();
}

void SsdTier::DropRecords(
    const google::protobuf::RepeatedPtrField<rpc::DiskDropTask>& drops) {
  uint64_t n = 0;
  for (const auto& d : drops) {
    n += storage_->Remove(d.tenant().empty() ? "default" : d.tenant(), d.key())
             .ok();
  }
  if (drops.size() > 0)
    metrics_.GetCounter("kvpool_node_disk_drops_total").Inc(n);
}

void SsdTier::EvictionLoop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    // At most every interval, and on any wake of cv_ (an offload or a
    // promotion finishing): a period, no deadline, so it stays on real time.
    cv_.WaitFor(&mu_,
                std::chrono::milliseconds(config_.ssd_eviction_interval_ms));
    if (stopping_) break;
    lock.Unlock();
    EvictIfNeeded();
    lock.Lock();
  }
}

void SsdTier::EvictIfNeeded() {
  std::vector<StoredObject> cands = storage_->PickEvictionCandidates();
  if (cands.empty()) return;
  rpc::RemoveDiskReplicasRequest req;
  req.set_node_id(node_id_);
  for (const auto& c : cands) {
    auto* o = req.add_objects();
    o->set_tenant(c.tenant);
    o->set_key(c.key);
    o->set_size(c.size);
  }
  rpc::RemoveDiskReplicasResponse resp;
  if (Status s = master_->Call(&Stub::RemoveDiskReplicas, req, &resp);
      !s.ok()) {
    metrics_.GetCounter("kvpool_node_ssd_evict_rpc_failures_total").Inc();
    return;  // nothing freed: the master still counts on these copies
  }
  uint64_t freed = 0, kept = 0;
  for (size_t i = 0; i < cands.size() && int(i) < resp.error_codes_size();
       ++i) {
    if (resp.error_codes(int(i)) == 0) {
      DropCopy(cands[i].tenant, cands[i].key, cands[i].object_version);
      ++freed;
    } else {
      ++kept;
    }
  }
  metrics_.GetCounter("kvpool_node_ssd_evicted_total").Inc(freed);
  metrics_.GetCounter("kvpool_node_ssd_evict_refused_total").Inc(kept);
}

}  // namespace kvpool
