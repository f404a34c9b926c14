// The frames of the TCP data client (docs/data_plane.md): how a call's ops
// are cut into requests within the server's limits, and one request/
// response exchange per op kind on a connection, scatter/gather straight
// between the socket and the caller's buffers. Internal to the data client.
#ifndef KVPOOL_TRANSPORT_TCP_DATA_CLIENT_FRAMES_H_
#define KVPOOL_TRANSPORT_TCP_DATA_CLIENT_FRAMES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvpool/status.h"
#include "transport/data_plane_types.h"
#include "transport/tcp_data_client_link.h"

namespace kvpool::data_client {

// The indices (into a call's ops or keys) that go in one request.
using Batch = std::span<const uint32_t>;

// Cuts the ops at `sendable` into requests: READ/WRITE within the frame's
// op count and payload; SSD_READ also within `max_frame_bytes` of server
// buffer (an op larger than that on its own still goes, alone); PREFETCH
// within the key frame body. The batches point into `sendable`.
template <typename OpT>
std::vector<Batch> SplitRanges(std::span<const OpT> ops,
                               const std::vector<uint32_t>& sendable);
std::vector<Batch> SplitKeyReads(std::span<const KeyReadOp> ops,
                                 const std::vector<uint32_t>& sendable,
                                 uint64_t max_frame_bytes);
std::vector<Batch> SplitPrefetch(const std::string& tenant,
                                 const std::vector<std::string>& keys,
                                 const std::vector<uint32_t>& sendable);

// One request and its response on `link`, for the ops at `batch`: each op's
// result is set (and a read's bytes land in its buffer). False, with
// *failure saying why, if the exchange broke off (the connection is then
// unusable).
template <typename OpT>  // ReadOp or WriteOp
bool ExchangeRanges(const Link& link, std::span<OpT> ops, Batch batch,
                    IoFailure* failure);
bool ExchangeKeyReads(const Link& link, std::span<KeyReadOp> ops, Batch batch,
                      IoFailure* failure);
// Sets results[i] for the keys at `batch`, or *unsupported when the node
// refuses PREFETCH as a whole (once it is set, later batches send nothing).
// `for_next_get` sends it as PREFETCH_FOR_NEXT_GET.
bool ExchangePrefetch(const Link& link, const std::string& tenant,
                      const std::vector<std::string>& keys,
                      const std::vector<std::string>* tokens, Batch batch,
                      bool for_next_get, std::vector<ErrorCode>& results,
                      bool* unsupported, IoFailure* failure);

}  // namespace kvpool::data_client

#endif  // KVPOOL_TRANSPORT_TCP_DATA_CLIENT_FRAMES_H_
