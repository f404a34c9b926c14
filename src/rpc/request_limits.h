// How big one request to kvpool-master may be: at most kMaxBatchItems items
// per batch RPC, and at most MaxRequestBytes() bytes on the wire. The master
// enforces both (the byte bound as gRPC's max receive message size, checked
// before a message is parsed; the item count in each handler, with
// INVALID_ARGUMENT whose message starts "INVALID_PARAMS"); MasterClient
// refuses a batch over the item count itself, before sending, and maps both
// refusals to INVALID_PARAMS. docs/security.md, "Limits on requests to the
// master".
#ifndef KVPOOL_RPC_REQUEST_LIMITS_H_
#define KVPOOL_RPC_REQUEST_LIMITS_H_

#include <cstdint>

namespace kvpool {

// Items (keys, objects, results) of one batch RPC.
inline constexpr int kMaxBatchItems = 65536;

// Per item, beyond its key and tenant: field tags and lengths, the size,
// version and offset varints, a replica config naming a node or two.
inline constexpr uint64_t kRequestItemOverheadBytes = 256;
// Per request: node id, tenant, token and the other single fields.
inline constexpr uint64_t kRequestFixedBytes = 4 << 20;

// The largest request a batch of kMaxBatchItems items, each with a key of
// max_key_bytes and a tenant of max_tenant_bytes, can make: 292 MiB with
// the master's defaults (4096, 256). The master's max receive message size.
constexpr uint64_t MaxRequestBytes(uint64_t max_key_bytes,
                                   uint64_t max_tenant_bytes) {
  return uint64_t{kMaxBatchItems} *
             (max_key_bytes + max_tenant_bytes + kRequestItemOverheadBytes) +
         kRequestFixedBytes;
}

// The items of a batch request message (its repeated keys, items, objects
// or results), 0 for a request of one key.
template <typename Req>
int BatchItems(const Req& r) {
  if constexpr (requires { r.keys_size(); }) {
    return r.keys_size();
  } else if constexpr (requires { r.items_size(); }) {
    return r.items_size();
  } else if constexpr (requires { r.objects_size(); }) {
    return r.objects_size();
  } else if constexpr (requires { r.results_size(); }) {
    return r.results_size();
  } else {
    return 0;
  }
}

}  // namespace kvpool

#endif  // KVPOOL_RPC_REQUEST_LIMITS_H_
