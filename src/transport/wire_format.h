// Internal: the TCP data plane's frame layout, shared by server and client.
// docs/data_plane.md is the normative description; keep the two in step.
//
// Every integer is little-endian on the wire whatever the host's order, so
// fields are encoded byte by byte (compilers turn this into plain loads and
// stores on little-endian hosts).
#ifndef KVPOOL_TRANSPORT_WIRE_FORMAT_H_
#define KVPOOL_TRANSPORT_WIRE_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace kvpool::wire {

// The bytes 'K' 'V' 'D' 'P' read as a little-endian u32.
inline constexpr uint32_t kMagic = 0x5044564B;
// Version 2 added the HELLO handshake (there was no released version 1);
// version 3 the capability token on every READ/WRITE range, SSD_READ key
// and PREFETCH key (see common/capability.h).
inline constexpr uint16_t kVersion = 3;

enum class Op : uint16_t {
  kRead = 1,
  kWrite = 2,
  // Reads values by key from the node's SSD tier. A server without an SSD
  // read handler answers with a frame-level INVALID_PARAMS instead of
  // dropping the connection, so a client can fall back.
  kSsdRead = 3,
  // The first frame on every connection, and only there: the client names
  // the node it means to reach (the body is that node id); the server
  // answers OK only if it is that node, else an error frame, and then
  // closes. Both bodies carry a node id, the response's the server's own.
  kHello = 4,
  // Asks the node to promote keys it holds on SSD into DRAM; answered per
  // key. A server without a prefetch handler answers with a frame-level
  // INVALID_PARAMS and keeps the connection.
  kPrefetch = 5,
  // PREFETCH from a get's kick (the body and answer are PREFETCH's): the
  // promotions it queues are for the next get of each key, not for the get
  // that just read it, so the holder never drops them for coming after that
  // read (promotion_skip_after_get_ms). A server that predates it closes the
  // connection as on any unknown op; a cluster runs one build.
  kPrefetchForNextGet = 6,
};

inline constexpr size_t kHeaderSize = 24;
// A READ/WRITE range: the bytes asked for, the range granted (which must
// contain them) and the token granting it.
inline constexpr size_t kTokenSize = 40;  // cap::kTokenSize
inline constexpr size_t kRangeSize = 24 + 16 + kTokenSize;
inline constexpr size_t kResultSize = 4;

// Limits that make a frame malformed when exceeded. They bound what a single
// request can make the server allocate (descriptors) or wait for (payload).
inline constexpr uint32_t kMaxOps = 65536;
inline constexpr uint64_t kMaxPayload = uint64_t{16} << 30;
// Bound of the body of SSD_READ and PREFETCH requests (key descriptors),
// and of the body a server without the op's handler reads and discards.
inline constexpr uint64_t kMaxKeyFrameBody = uint64_t{8} << 20;
// Keys are 1 to kMaxKeySize bytes, tenants 0 to kMaxTenantSize (empty is
// the default tenant); both raw bytes without a terminator.
inline constexpr size_t kMaxKeySize = 4096;
inline constexpr size_t kMaxTenantSize = 4096;
// SSD_READ: the server gives each op a buffer slot of its length rounded up
// to this, so every slot starts 4096-aligned (O_DIRECT); the sum of the
// slots is what the server's limit bounds (by default the value below).
inline constexpr uint64_t kSsdReadAlign = 4096;
inline constexpr uint64_t kDefaultMaxSsdReadBytes = uint64_t{256} << 20;
// Bounds of the node id carried by HELLO frames (bytes, no terminator).
inline constexpr size_t kMinNodeIdSize = 1;
inline constexpr size_t kMaxNodeIdSize = 256;

// Same layout for requests and responses.
//   0  u32 magic
//   4  u16 version
//   6  u16 op        (responses echo the request's op)
//   8  u32 count     (ranges in a request, result codes in a response)
//  12  i32 status    (requests: must be 0; responses: frame-level ErrorCode)
//  16  u64 body_len  (bytes that follow the header)
struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t op = 0;
  uint32_t count = 0;
  int32_t status = 0;
  uint64_t body_len = 0;
};

// SSD_READ key descriptor: a fixed part, then the tenant and key bytes.
//   0  u64 length
//   8  u32 tenant_len
//  12  u32 key_len
//  16  token[40]
//  56  tenant, then key
inline constexpr size_t kKeyReadFixedSize = 16 + kTokenSize;
// PREFETCH body: u32 tenant_len, tenant, then per key u32 key_len, key,
// token[40].
inline constexpr size_t kLenPrefixSize = 4;

inline constexpr uint64_t RoundUpToSsdAlign(uint64_t n) {
  return (n + kSsdReadAlign - 1) / kSsdReadAlign * kSsdReadAlign;
}

// Range entry:
//   0  u64 segment_id
//   8  u64 offset       \ the bytes to move
//  16  u64 length       /
//  24  u64 grant_offset \ the range the token grants
//  32  u64 grant_length /
//  40  token[40]
struct Range {
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t grant_offset = 0;
  uint64_t grant_length = 0;
  const uint8_t* token = nullptr;  // kTokenSize bytes; null encodes zeros
};

template <typename T>
inline void PutLe(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
  }
}

template <typename T>
inline T GetLe(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<uint64_t>(p[i]) << (8 * i);
  }
  return static_cast<T>(v);
}

inline void EncodeHeader(const Header& h, uint8_t* out) {
  PutLe<uint32_t>(out, h.magic);
  PutLe<uint16_t>(out + 4, h.version);
  PutLe<uint16_t>(out + 6, h.op);
  PutLe<uint32_t>(out + 8, h.count);
  PutLe<uint32_t>(out + 12, static_cast<uint32_t>(h.status));
  PutLe<uint64_t>(out + 16, h.body_len);
}

inline Header DecodeHeader(const uint8_t* in) {
  Header h;
  h.magic = GetLe<uint32_t>(in);
  h.version = GetLe<uint16_t>(in + 4);
  h.op = GetLe<uint16_t>(in + 6);
  h.count = GetLe<uint32_t>(in + 8);
  h.status = static_cast<int32_t>(GetLe<uint32_t>(in + 12));
  h.body_len = GetLe<uint64_t>(in + 16);
  return h;
}

inline void PutToken(const uint8_t* token, uint8_t* out) {
  for (size_t i = 0; i < kTokenSize; ++i) out[i] = token ? token[i] : 0;
}

inline void EncodeRange(const Range& r, uint8_t* out) {
  PutLe<uint64_t>(out, r.segment_id);
  PutLe<uint64_t>(out + 8, r.offset);
  PutLe<uint64_t>(out + 16, r.length);
  PutLe<uint64_t>(out + 24, r.grant_offset);
  PutLe<uint64_t>(out + 32, r.grant_length);
  PutToken(r.token, out + 40);
}

// The returned range's token points into `in`.
inline Range DecodeRange(const uint8_t* in) {
  return Range{GetLe<uint64_t>(in),      GetLe<uint64_t>(in + 8),
               GetLe<uint64_t>(in + 16), GetLe<uint64_t>(in + 24),
               GetLe<uint64_t>(in + 32), in + 40};
}

// True iff [offset, offset+length) lies inside the granted range (overflow
// safe).
inline bool InsideGrant(const Range& r) {
  return r.offset >= r.grant_offset && r.grant_length >= r.length &&
         r.offset - r.grant_offset <= r.grant_length - r.length;
}

}  // namespace kvpool::wire

#endif  // KVPOOL_TRANSPORT_WIRE_FORMAT_H_
