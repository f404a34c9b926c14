// Operations the data plane carries: reads and writes of segment ranges.
#ifndef KVPOOL_TRANSPORT_DATA_PLANE_TYPES_H_
#define KVPOOL_TRANSPORT_DATA_PLANE_TYPES_H_

#include <cstdint>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

// The master's permission for an op (common/capability.h): the range it
// granted and its token, carried to the node unread. `token` (40 bytes, or
// null) must outlive the call. A node that enforces capabilities refuses
// an op whose range is not inside the grant or whose token does not verify
// (ILLEGAL_CLIENT, or LEASE_EXPIRED once it has run out).
struct Grant {
  uint64_t offset = 0;
  uint64_t length = 0;
  const uint8_t* token = nullptr;
};

// The grant a master's reply carries for a MEMORY replica (any type with
// offset(), length() and capability(), i.e. rpc::MemoryLocation): valid
// while `loc` is.
template <typename Location>
Grant GrantOf(const Location& loc) {
  const auto& t = loc.capability();
  return Grant{
      loc.offset(), loc.length(),
      t.size() == 40 ? reinterpret_cast<const uint8_t*>(t.data()) : nullptr};
}

// Copy [offset, offset+length) of segment `segment_id` into `dest`.
struct ReadOp {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dest = nullptr;
  ErrorCode result = ErrorCode::OK;  // filled in per op
  Grant grant;
};

// Copy `length` bytes from `src` to [offset, offset+length) of the segment.
struct WriteOp {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  const uint8_t* src = nullptr;
  ErrorCode result = ErrorCode::OK;  // filled in per op
  Grant grant;
};

// Read a value by key from the holder's SSD (the SSD_READ operation): the
// holder looks the key up in its own storage; `length` is the size the
// master reported, and a stored value of any other size is a miss.
struct KeyReadOp {
  std::string tenant;
  std::string key;
  uint64_t length = 0;
  uint8_t* dest = nullptr;
  ErrorCode result = ErrorCode::OK;  // filled in per op
  std::string token;                 // the master's grant (40 bytes, or empty)
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_DATA_PLANE_TYPES_H_
