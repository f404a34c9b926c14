// A small client of etcd's v3 API through its HTTP/JSON gateway (etcd 3.4:
// POST /v3/kv/range, /v3/kv/txn, /v3/lease/...), enough for a leader
// election: leases, a create-if-absent transaction and reads. Not a general
// etcd client: no watch (callers poll), no auth, no TLS to etcd.
//
// An endpoint list is tried in turn: a call goes to the endpoint that last
// answered and moves on to the next one only when that one cannot be
// reached, so one dead etcd member costs a single connect timeout.
// Thread-safe.
#ifndef KVPOOL_HA_ETCD_CLIENT_H_
#define KVPOOL_HA_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvpool/status.h"

namespace kvpool::ha {

// "h1:2379;h2:2379", "http://h1:2379,h2:2379" (Mooncake writes ';') ->
// {"h1:2379", "h2:2379"}. INVALID_PARAMS for an empty list, an https://
// endpoint (not supported) or an entry without a port.
Result<std::vector<std::string>> ParseEndpoints(std::string_view list);

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_s = 0;
};

struct CreateResult {
  bool created = false;
  // created: the revision of our put. Otherwise the key as it stands.
  int64_t revision = 0;
  std::optional<KeyValue> existing;
};

class EtcdClient {
 public:
  // `endpoints` as ParseEndpoints returns them; every call gives up after
  // `timeout_ms` per endpoint.
  EtcdClient(std::vector<std::string> endpoints, int timeout_ms);

  Result<LeaseGrant> GrantLease(int64_t ttl_s);
  // The TTL the lease has again; OBJECT_NOT_FOUND when etcd no longer has
  // it (it expired: whatever was attached to it is gone).
  Result<int64_t> KeepAlive(int64_t lease_id);
  Status Revoke(int64_t lease_id);
  // Puts key=value attached to `lease_id` only if the key does not exist.
  Result<CreateResult> CreateIfAbsent(const std::string& key,
                                      const std::string& value,
                                      int64_t lease_id);
  // nullopt: no such key.
  Result<std::optional<KeyValue>> Get(const std::string& key);
  Status Put(const std::string& key, const std::string& value);
  Status Delete(const std::string& key);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  // POSTs `body` to `path`, trying each endpoint once starting from the
  // last one that answered; the parsed JSON reply text.
  Result<std::string> Post(const std::string& path, const std::string& body);
  std::vector<std::string> endpoints_;
  int timeout_ms_;
  std::atomic<size_t> preferred_{0};
};

}  // namespace kvpool::ha

#endif  // KVPOOL_HA_ETCD_CLIENT_H_
