// One map key for a (tenant, key) pair in the holder's per-key tables
// (SharedReads, InFlightReads): the two joined by a NUL, which neither a
// tenant name nor a key of the master's ever holds in that position.
#ifndef KVPOOL_NODE_TENANT_KEY_ID_H_
#define KVPOOL_NODE_TENANT_KEY_ID_H_

#include <string>
#include <string_view>

namespace kvpool {

inline std::string TenantKeyId(std::string_view tenant, std::string_view key) {
  std::string id;
  id.reserve(tenant.size() + 1 + key.size());
  id.append(tenant).push_back('\0');
  id.append(key);
  return id;
}

}  // namespace kvpool

#endif  // KVPOOL_NODE_TENANT_KEY_ID_H_
