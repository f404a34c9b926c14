// Operations the data plane carries: reads and writes of segment ranges.
#ifndef KVPOOL_TRANSPORT_DATA_PLANE_TYPES_H_
#define KVPOOL_TRANSPORT_DATA_PLANE_TYPES_H_

#include <cstdint>
#include <string>

#include "kvpool/status.h"

namespace kvpool {

// Copy [offset, offset+length) of segment `segment_id` into `dest`.
struct ReadOp {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dest = nullptr;
  ErrorCode result = ErrorCode::OK;  // filled in per op
};

// Copy `length` bytes from `src` to [offset, offset+length) of the segment.
struct WriteOp {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  const uint8_t* src = nullptr;
  ErrorCode result = ErrorCode::OK;  // filled in per op
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
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_DATA_PLANE_TYPES_H_
