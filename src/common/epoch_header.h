// The gRPC header that carries a leader's epoch (docs/ha.md): every reply of
// a master with standbys has it (initial metadata, decimal), and clients that
// follow the leader through etcd refuse a reply of an epoch older than one
// they have seen. Shared by the master and its clients.
#ifndef KVPOOL_COMMON_EPOCH_HEADER_H_
#define KVPOOL_COMMON_EPOCH_HEADER_H_

namespace kvpool {

inline constexpr char kEpochHeader[] = "kvpool-epoch";

}  // namespace kvpool

#endif  // KVPOOL_COMMON_EPOCH_HEADER_H_
