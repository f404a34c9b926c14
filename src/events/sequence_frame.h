// The second frame of every KV-events message: the batch's sequence number,
// 8 bytes, big-endian (as vLLM's). The replay socket's "from N" request and
// the end of its answer use the same frame; one definition for publisher
// and subscriber, so the two cannot drift apart.
#ifndef KVPOOL_EVENTS_SEQUENCE_FRAME_H_
#define KVPOOL_EVENTS_SEQUENCE_FRAME_H_

#include <cstdint>
#include <string>
#include <zmq.hpp>

namespace kvpool::events {

// The sequence number that ends a replay answer.
inline constexpr uint64_t kReplayEndMarker = ~uint64_t{0};

inline std::string EncodeSequence(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

// `m` must hold exactly 8 bytes (callers check the frame's size first).
inline uint64_t DecodeSequence(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8; ++i) v = v << 8 | p[i];
  return v;
}

}  // namespace kvpool::events

#endif  // KVPOOL_EVENTS_SEQUENCE_FRAME_H_
