// The C API: a thin shell over compat::MooncakeStore, which holds the
// Mooncake conventions. This file only converts C types and guards against
// NULL arguments; no C++ exception crosses the boundary.
#include "kvpool/c_api.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "capi/compat_store.h"

struct kvpool_store {
  kvpool::compat::MooncakeStore impl;
};

namespace {

using kvpool::compat::MooncakeReplicateConfig;
using kvpool::compat::SoftPinAction;

constexpr int kInvalid = KVPOOL_ERR_INVALID_PARAMS;
constexpr int kInternal = KVPOOL_ERR_INTERNAL;

// false for an action outside the enum.
bool ToConfig(const kvpool_replicate_config_t* c,
              MooncakeReplicateConfig* out) {
  if (c == nullptr) return true;
  if (c->soft_pin_action < 0 || c->soft_pin_action > 2) return false;
  if (c->num_preferred_segments > 0 && c->preferred_segments == nullptr)
    return false;
  out->replica_num = c->replica_num;
  out->with_soft_pin = c->with_soft_pin != 0;
  out->soft_pin_action = static_cast<SoftPinAction>(c->soft_pin_action);
  if (c->soft_pin_ttl_ms >= 0) out->soft_pin_ttl_ms = c->soft_pin_ttl_ms;
  out->with_hard_pin = c->with_hard_pin != 0;
  if (c->preferred_segment) out->preferred_segment = c->preferred_segment;
  for (size_t i = 0; i < c->num_preferred_segments; ++i) {
    if (c->preferred_segments[i] == nullptr) return false;
    out->preferred_segments.emplace_back(c->preferred_segments[i]);
  }
  return true;
}

// Keys of a batch; false if the array or any key is NULL.
bool ToKeys(const char* const* keys, size_t n, std::vector<std::string>* out) {
  if (n > 0 && keys == nullptr) return false;
  out->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (keys[i] == nullptr) return false;
    out->emplace_back(keys[i]);
  }
  return true;
}

template <typename T>
int FirstError(const std::vector<T>& results) {
  for (T r : results) {
    if (r < 0) return static_cast<int>(r);
  }
  return 0;
}

// Runs f, turning an escaping exception (bad_alloc) into INTERNAL_ERROR.
template <typename F>
auto Guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    return kInternal;
  }
}

// A mount's result for C: its id (or "" when nothing was mounted) copied
// into segment_id, which holds cap >= KVPOOL_SEGMENT_ID_SIZE bytes. The
// compat store mounts at most one segment per call; should an id not fit
// after all, the segment is taken back and the call fails.
int CopyMounted(kvpool_store* store,
                kvpool::compat::MooncakeStore::MountResult r, char* segment_id,
                size_t cap, bool allocated) {
  segment_id[0] = '\0';
  if (r.ret != 0) return r.ret;
  if (r.segment_ids.empty()) return 0;
  const std::string& id = r.segment_ids.front();
  if (r.segment_ids.size() > 1 || id.size() + 1 > cap) {
    const int undo = allocated
                         ? store->impl.UnmountAndFreeSegment(r.segment_ids, 0)
                         : store->impl.UnmountSegment(r.segment_ids, 0);
    return undo == 0 ? KVPOOL_ERR_BUFFER_OVERFLOW : undo;
  }
  std::memcpy(segment_id, id.c_str(), id.size() + 1);
  return 0;
}

}  // namespace

extern "C" {

void kvpool_replicate_config_init(kvpool_replicate_config_t* config) {
  if (config == nullptr) return;
  std::memset(config, 0, sizeof(*config));
  config->replica_num = 1;
  config->soft_pin_action = KVPOOL_SOFT_PIN_PRESERVE;
  config->soft_pin_ttl_ms = -1;
}

kvpool_store_t* kvpool_store_create(void) {
  return new (std::nothrow) kvpool_store();
}

void kvpool_store_destroy(kvpool_store_t* store) { delete store; }

int kvpool_store_setup(kvpool_store_t* store, const char* local_hostname,
                       const char* metadata_server,
                       uint64_t global_segment_size, uint64_t local_buffer_size,
                       const char* protocol, const char* rdma_devices,
                       const char* master_server_addr) {
  if (store == nullptr || local_hostname == nullptr ||
      master_server_addr == nullptr) {
    return kInvalid;
  }
  return Guard([&] {
    kvpool::compat::SetupConfig c;
    c.local_hostname = local_hostname;
    if (metadata_server) c.metadata_server = metadata_server;
    c.global_segment_size = global_segment_size;
    c.local_buffer_size = local_buffer_size;
    if (protocol) c.protocol = protocol;
    if (rdma_devices) c.rdma_devices = rdma_devices;
    c.master_server_addr = master_server_addr;
    return store->impl.Setup(c);
  });
}

int kvpool_store_setup_dict(kvpool_store_t* store, const char* const* keys,
                            const char* const* values, size_t n) {
  if (store == nullptr || (n > 0 && (keys == nullptr || values == nullptr)))
    return kInvalid;
  return Guard([&]() -> int {
    std::map<std::string, std::string> dict;
    for (size_t i = 0; i < n; ++i) {
      if (keys[i] == nullptr || values[i] == nullptr) return kInvalid;
      dict[keys[i]] = values[i];
    }
    return store->impl.SetupFromDict(dict);
  });
}

int kvpool_store_close(kvpool_store_t* store) {
  if (store == nullptr) return kInvalid;
  return store->impl.Close();
}

int kvpool_store_get_hostname(kvpool_store_t* store, char* buf, size_t cap) {
  if (store == nullptr || buf == nullptr) return kInvalid;
  return Guard([&]() -> int {
    std::string h = store->impl.GetHostname();
    if (h.size() + 1 > cap) return KVPOOL_ERR_BUFFER_OVERFLOW;
    std::memcpy(buf, h.c_str(), h.size() + 1);
    return static_cast<int>(h.size());
  });
}

int kvpool_store_health_check(kvpool_store_t* store) {
  if (store == nullptr) return kInvalid;
  return Guard([&] { return store->impl.HealthCheck(); });
}

int kvpool_store_mount_segment(kvpool_store_t* store, const char* path,
                               int64_t size, int64_t offset,
                               const char* /*protocol*/,
                               const char* /*location*/, char* segment_id,
                               size_t cap) {
  if (store == nullptr || path == nullptr || segment_id == nullptr)
    return kInvalid;
  if (cap < KVPOOL_SEGMENT_ID_SIZE) return KVPOOL_ERR_BUFFER_OVERFLOW;
  return Guard([&] {
    auto r = store->impl.MountSegment(path, size, offset);
    return CopyMounted(store, std::move(r), segment_id, cap, false);
  });
}

int kvpool_store_allocate_and_mount_segment(kvpool_store_t* store, int64_t size,
                                            const char* /*protocol*/,
                                            const char* /*location*/,
                                            char* segment_id, size_t cap,
                                            uint64_t* allocated_size) {
  if (store == nullptr || segment_id == nullptr) return kInvalid;
  if (cap < KVPOOL_SEGMENT_ID_SIZE) return KVPOOL_ERR_BUFFER_OVERFLOW;
  if (allocated_size) *allocated_size = 0;
  return Guard([&] {
    auto r = store->impl.AllocateAndMountSegment(size);
    const uint64_t allocated = r.allocated_size;
    const int ret = CopyMounted(store, std::move(r), segment_id, cap, true);
    if (ret == 0 && allocated_size) *allocated_size = allocated;
    return ret;
  });
}

int kvpool_store_unmount_segment(kvpool_store_t* store,
                                 const char* const* segment_ids, size_t n,
                                 int64_t grace_period_seconds) {
  if (store == nullptr) return kInvalid;
  return Guard([&]() -> int {
    std::vector<std::string> ids;
    if (!ToKeys(segment_ids, n, &ids)) return kInvalid;
    return store->impl.UnmountSegment(ids, grace_period_seconds);
  });
}

int kvpool_store_unmount_and_free_segment(kvpool_store_t* store,
                                          const char* const* segment_ids,
                                          size_t n,
                                          int64_t grace_period_seconds) {
  if (store == nullptr) return kInvalid;
  return Guard([&]() -> int {
    std::vector<std::string> ids;
    if (!ToKeys(segment_ids, n, &ids)) return kInvalid;
    return store->impl.UnmountAndFreeSegment(ids, grace_period_seconds);
  });
}

int kvpool_store_put(kvpool_store_t* store, const char* key, const void* value,
                     int64_t size, const kvpool_replicate_config_t* config) {
  if (store == nullptr || key == nullptr || size < 0 ||
      (value == nullptr && size > 0)) {
    return kInvalid;
  }
  return Guard([&] {
    MooncakeReplicateConfig rc;
    if (!ToConfig(config, &rc)) return kInvalid;
    return store->impl.Put(
        key, {static_cast<const char*>(value), static_cast<size_t>(size)}, rc);
  });
}

int kvpool_store_upsert(kvpool_store_t* store, const char* key,
                        const void* value, int64_t size,
                        const kvpool_replicate_config_t* config) {
  if (store == nullptr || key == nullptr || size < 0 ||
      (value == nullptr && size > 0)) {
    return kInvalid;
  }
  return Guard([&] {
    MooncakeReplicateConfig rc;
    if (!ToConfig(config, &rc)) return kInvalid;
    return store->impl.Upsert(
        key, {static_cast<const char*>(value), static_cast<size_t>(size)}, rc);
  });
}

int kvpool_store_register_buffer(kvpool_store_t* store, void* buf,
                                 int64_t size) {
  if (store == nullptr) return kInvalid;
  return Guard([&] { return store->impl.RegisterBuffer(buf, size); });
}

int kvpool_store_unregister_buffer(kvpool_store_t* store, void* buf) {
  if (store == nullptr) return kInvalid;
  return Guard([&] { return store->impl.UnregisterBuffer(buf); });
}

int kvpool_store_put_from(kvpool_store_t* store, const char* key,
                          const void* buf, int64_t size,
                          const kvpool_replicate_config_t* config) {
  if (store == nullptr || key == nullptr) return kInvalid;
  return Guard([&] {
    MooncakeReplicateConfig rc;
    if (!ToConfig(config, &rc)) return kInvalid;
    return store->impl.PutFrom(key, buf, size, rc);
  });
}

int kvpool_store_batch_put_from(kvpool_store_t* store, const char* const* keys,
                                const void* const* bufs, const int64_t* sizes,
                                size_t n,
                                const kvpool_replicate_config_t* config,
                                int* results) {
  if (store == nullptr || (n > 0 && (bufs == nullptr || sizes == nullptr)))
    return kInvalid;
  // Everything that allocates runs inside the guard: no exception may
  // cross the C boundary.
  return Guard([&] {
    MooncakeReplicateConfig rc;
    std::vector<std::string> k;
    if (!ToConfig(config, &rc) || !ToKeys(keys, n, &k)) return kInvalid;
    // Not brace-initialised: {bufs, bufs + n} would be a list of two
    // pointers.
    std::vector<const void*> b(bufs, bufs + n);
    std::vector<int64_t> sz(sizes, sizes + n);
    auto r = store->impl.BatchPutFrom(k, b, sz, rc);
    if (results) std::copy(r.begin(), r.end(), results);
    return FirstError(r);
  });
}

int64_t kvpool_store_get_into(kvpool_store_t* store, const char* key, void* buf,
                              int64_t size) {
  if (store == nullptr || key == nullptr) return kInvalid;
  return Guard([&] { return store->impl.GetInto(key, buf, size); });
}

int kvpool_store_batch_get_into(kvpool_store_t* store, const char* const* keys,
                                void* const* bufs, const int64_t* sizes,
                                size_t n, int64_t* results) {
  if (store == nullptr || (n > 0 && (bufs == nullptr || sizes == nullptr)))
    return kInvalid;
  return Guard([&] {
    std::vector<std::string> k;
    if (!ToKeys(keys, n, &k)) return kInvalid;
    std::vector<void*> b(bufs, bufs + n);
    std::vector<int64_t> sz(sizes, sizes + n);
    auto r = store->impl.BatchGetInto(k, b, sz);
    if (results) std::copy(r.begin(), r.end(), results);
    return FirstError(r);
  });
}

int kvpool_store_is_exist(kvpool_store_t* store, const char* key) {
  if (store == nullptr || key == nullptr) return -1;
  return Guard([&] { return store->impl.IsExist(key); });
}

int kvpool_store_batch_is_exist(kvpool_store_t* store, const char* const* keys,
                                size_t n, int* results) {
  if (store == nullptr) return kInvalid;
  return Guard([&] {
    std::vector<std::string> k;
    if (!ToKeys(keys, n, &k)) return kInvalid;
    auto r = store->impl.BatchIsExist(k);
    if (results) std::copy(r.begin(), r.end(), results);
    return FirstError(r);
  });
}

int64_t kvpool_store_get_size(kvpool_store_t* store, const char* key) {
  if (store == nullptr || key == nullptr) return kInvalid;
  return Guard([&] { return store->impl.GetSize(key); });
}

int kvpool_store_remove(kvpool_store_t* store, const char* key, int force) {
  if (store == nullptr || key == nullptr) return kInvalid;
  return Guard([&] { return store->impl.Remove(key, force != 0); });
}

int64_t kvpool_store_remove_all(kvpool_store_t* store, int force) {
  if (store == nullptr) return kInvalid;
  return Guard([&] { return store->impl.RemoveAll(force != 0); });
}

const char* kvpool_error_name(int code) {
  return kvpool::ErrorCodeName(static_cast<kvpool::ErrorCode>(code));
}

}  // extern "C"
