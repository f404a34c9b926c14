#include "transport/tcp_data_client_frames.h"

#include <cstring>
#include <type_traits>

#include "transport/wire_format.h"

namespace kvpool::data_client {
namespace {

bool ProtocolError(IoFailure* failure, const char* what) {
  failure->message = std::string("bad response from server: ") + what;
  return false;
}

// Receives the head of the response to a request of `op` with `n` ops: the
// header into *rh and, if the server took the frame (status 0), the n
// result codes into *codes. A refused frame (status != 0) has no body.
// The server sends header, codes and data in one write, so one recv usually
// takes them all (a syscall or two saved per call: a single small get is a
// handful of syscalls). `first` (may be empty) is where the data of a lone
// op goes if it succeeds: only with one op is the place of the first data
// byte known before the codes are read. *first_got is how much landed there.
bool ReceiveHead(const Link& link, uint16_t op, uint32_t n, wire::Header* rh,
                 std::vector<ErrorCode>* codes, std::span<uint8_t> first,
                 size_t* first_got, IoFailure* failure) {
  const size_t head = wire::kHeaderSize + size_t{n} * wire::kResultSize;
  uint8_t small[wire::kHeaderSize + 64 * wire::kResultSize];
  std::vector<uint8_t> large;
  uint8_t* raw = small;
  if (head > sizeof(small)) {
    large.resize(head);
    raw = large.data();
  }
  size_t got = 0;
  *first_got = 0;
  if (!ReceiveAtLeast(link, raw, head, first.data(), first.size(),
                      wire::kHeaderSize, &got, "receive response", failure)) {
    return false;
  }
  *rh = wire::DecodeHeader(raw);
  if (rh->magic != wire::kMagic || rh->version != wire::kVersion ||
      rh->op != op) {
    return ProtocolError(failure, "header mismatch");
  }
  codes->clear();
  if (rh->status != 0) {
    // The server refused the whole frame but kept the stream in sync.
    if (rh->count != 0 || rh->body_len != 0 || got != wire::kHeaderSize) {
      return ProtocolError(failure, "error frame with a body");
    }
    return true;
  }
  if (rh->count != n) return ProtocolError(failure, "result count mismatch");
  if (!ReceiveAtLeast(link, raw, head, nullptr, 0, head, &got,
                      "receive results", failure)) {
    return false;
  }
  *first_got = got - head;
  codes->resize(n);
  const uint8_t* codes_raw = raw + wire::kHeaderSize;
  for (uint32_t i = 0; i < n; ++i) {
    (*codes)[i] = ErrorCodeFromInt(static_cast<int32_t>(
        wire::GetLe<uint32_t>(codes_raw + i * wire::kResultSize)));
  }
  return true;
}

// Sends the request gathered in `iov`, then takes one result per op and, when
// `kReceivesData`, the bytes of the successful ops scattered straight into
// their destinations. Shared by READ, WRITE and SSD_READ.
template <bool kReceivesData, typename OpT>
bool SendAndCollect(const Link& link, uint16_t op, std::vector<iovec>& iov,
                    std::span<OpT> ops, std::span<const uint32_t> batch,
                    IoFailure* failure) {
  if (!TransferAll(link, iov, /*sending=*/true, "send request", failure)) {
    return false;
  }
  const uint32_t n = static_cast<uint32_t>(batch.size());
  wire::Header rh;
  std::vector<ErrorCode> codes;
  std::span<uint8_t> first;
  if constexpr (kReceivesData) {
    if (n == 1) first = {ops[batch[0]].dest, ops[batch[0]].length};
  }
  size_t first_got = 0;
  if (!ReceiveHead(link, op, n, &rh, &codes, first, &first_got, failure)) {
    return false;
  }
  if (rh.status != 0) {
    const ErrorCode code = ErrorCodeFromInt(rh.status);
    for (uint32_t idx : batch) ops[idx].result = code;
    return true;
  }
  iov.clear();
  uint64_t data_len = 0;
  for (uint32_t i = 0; i < n; ++i) {
    OpT& o = ops[batch[i]];
    o.result = codes[i];
    if constexpr (kReceivesData) {
      if (o.result == ErrorCode::OK) {
        iov.push_back(Iov(o.dest, o.length));
        data_len += o.length;
      }
    }
  }
  if (rh.body_len != uint64_t{n} * wire::kResultSize + data_len) {
    return ProtocolError(failure, "body length mismatch");
  }
  if (first_got > data_len) return ProtocolError(failure, "data for a failure");
  if (first_got > 0) {  // a lone op's first bytes came with the codes
    iov[0].iov_base = static_cast<uint8_t*>(iov[0].iov_base) + first_got;
    iov[0].iov_len -= first_got;
  }
  if (data_len > 0 &&
      !TransferAll(link, iov, /*sending=*/false, "receive data", failure)) {
    return false;
  }
  return true;
}

}  // namespace

template <typename OpT>
std::vector<Batch> SplitRanges(std::span<const OpT> ops,
                               const std::vector<uint32_t>& sendable) {
  std::vector<Batch> batches;
  for (size_t begin = 0; begin < sendable.size();) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < sendable.size() && end - begin < wire::kMaxOps &&
           bytes + ops[sendable[end]].length <= wire::kMaxPayload) {
      bytes += ops[sendable[end]].length;
      ++end;
    }
    batches.emplace_back(sendable.data() + begin, end - begin);
    begin = end;
  }
  return batches;
}

std::vector<Batch> SplitKeyReads(std::span<const KeyReadOp> ops,
                                 const std::vector<uint32_t>& sendable,
                                 uint64_t max_frame_bytes) {
  std::vector<Batch> batches;
  for (size_t begin = 0; begin < sendable.size();) {
    size_t end = begin;
    uint64_t body = 0;
    uint64_t slots = 0;
    while (end < sendable.size() && end - begin < wire::kMaxOps) {
      const KeyReadOp& op = ops[sendable[end]];
      const uint64_t desc =
          wire::kKeyReadFixedSize + op.tenant.size() + op.key.size();
      const uint64_t slot = wire::RoundUpToSsdAlign(op.length);
      if (end > begin && (body + desc > wire::kMaxKeyFrameBody ||
                          slots + slot > max_frame_bytes)) {
        break;
      }
      body += desc;
      slots += slot;
      ++end;
    }
    batches.emplace_back(sendable.data() + begin, end - begin);
    begin = end;
  }
  return batches;
}

std::vector<Batch> SplitPrefetch(const std::string& tenant,
                                 const std::vector<std::string>& keys,
                                 const std::vector<uint32_t>& sendable) {
  std::vector<Batch> batches;
  const uint64_t head = wire::kLenPrefixSize + tenant.size();
  for (size_t begin = 0; begin < sendable.size();) {
    size_t end = begin;
    uint64_t body = head;
    while (end < sendable.size() && end - begin < wire::kMaxOps) {
      const uint64_t entry =
          wire::kLenPrefixSize + keys[sendable[end]].size() + wire::kTokenSize;
      if (body + entry > wire::kMaxKeyFrameBody) break;
      body += entry;
      ++end;
    }
    batches.emplace_back(sendable.data() + begin, end - begin);
    begin = end;
  }
  return batches;
}

template <typename OpT>
bool ExchangeRanges(const Link& link, std::span<OpT> ops, Batch batch,
                    IoFailure* failure) {
  constexpr bool kIsRead = std::is_same_v<OpT, ReadOp>;
  const uint32_t n = static_cast<uint32_t>(batch.size());
  uint64_t payload = 0;
  for (uint32_t idx : batch) payload += ops[idx].length;

  std::vector<uint8_t> request(wire::kHeaderSize +
                               size_t{n} * wire::kRangeSize);
  wire::Header h;
  h.op = static_cast<uint16_t>(kIsRead ? wire::Op::kRead : wire::Op::kWrite);
  h.count = n;
  h.body_len = uint64_t{n} * wire::kRangeSize + (kIsRead ? 0 : payload);
  wire::EncodeHeader(h, request.data());
  for (uint32_t i = 0; i < n; ++i) {
    const OpT& op = ops[batch[i]];
    wire::EncodeRange(
        {op.segment_id, op.offset, op.length, op.grant.offset, op.grant.length,
         op.grant.token},
        request.data() + wire::kHeaderSize + i * wire::kRangeSize);
  }
  // Header, ranges and (for WRITE) every payload leave in gathered sends
  // straight from the caller's buffers.
  std::vector<iovec> iov;
  iov.reserve(kIsRead ? 1 : n + 1);
  iov.push_back(Iov(request.data(), request.size()));
  if constexpr (!kIsRead) {
    for (uint32_t idx : batch)
      iov.push_back(Iov(ops[idx].src, ops[idx].length));
  }
  return SendAndCollect<kIsRead>(link, h.op, iov, ops, batch, failure);
}

bool ExchangeKeyReads(const Link& link, std::span<KeyReadOp> ops, Batch batch,
                      IoFailure* failure) {
  const uint32_t n = static_cast<uint32_t>(batch.size());
  uint64_t body_len = 0;
  for (uint32_t idx : batch) {
    body_len +=
        wire::kKeyReadFixedSize + ops[idx].tenant.size() + ops[idx].key.size();
  }
  std::vector<uint8_t> request(wire::kHeaderSize +
                               static_cast<size_t>(body_len));
  wire::Header h;
  h.op = static_cast<uint16_t>(wire::Op::kSsdRead);
  h.count = n;
  h.body_len = body_len;
  wire::EncodeHeader(h, request.data());
  uint8_t* p = request.data() + wire::kHeaderSize;
  for (uint32_t idx : batch) {
    const KeyReadOp& op = ops[idx];
    wire::PutLe<uint64_t>(p, op.length);
    wire::PutLe<uint32_t>(p + 8, static_cast<uint32_t>(op.tenant.size()));
    wire::PutLe<uint32_t>(p + 12, static_cast<uint32_t>(op.key.size()));
    wire::PutToken(op.token.size() == wire::kTokenSize
                       ? reinterpret_cast<const uint8_t*>(op.token.data())
                       : nullptr,
                   p + 16);
    p += wire::kKeyReadFixedSize;
    std::memcpy(p, op.tenant.data(), op.tenant.size());
    p += op.tenant.size();
    std::memcpy(p, op.key.data(), op.key.size());
    p += op.key.size();
  }
  std::vector<iovec> iov(1, Iov(request.data(), request.size()));
  return SendAndCollect<true>(link, h.op, iov, ops, batch, failure);
}

bool ExchangePrefetch(const Link& link, const std::string& tenant,
                      const std::vector<std::string>& keys,
                      const std::vector<std::string>* tokens, Batch batch,
                      bool for_next_get, std::vector<ErrorCode>& results,
                      bool* unsupported, IoFailure* failure) {
  if (*unsupported) return true;  // an earlier batch learned it already
  const uint32_t n = static_cast<uint32_t>(batch.size());
  uint64_t body_len = wire::kLenPrefixSize + tenant.size();
  for (uint32_t idx : batch)
    body_len += wire::kLenPrefixSize + keys[idx].size() + wire::kTokenSize;
  std::vector<uint8_t> request(wire::kHeaderSize +
                               static_cast<size_t>(body_len));
  wire::Header h;
  h.op = static_cast<uint16_t>(for_next_get ? wire::Op::kPrefetchForNextGet
                                            : wire::Op::kPrefetch);
  h.count = n;
  h.body_len = body_len;
  wire::EncodeHeader(h, request.data());
  uint8_t* p = request.data() + wire::kHeaderSize;
  auto put = [&p](const std::string& s) {
    wire::PutLe<uint32_t>(p, static_cast<uint32_t>(s.size()));
    p += wire::kLenPrefixSize;
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(tenant);
  for (uint32_t idx : batch) {
    put(keys[idx]);
    const bool has = tokens && idx < tokens->size() &&
                     (*tokens)[idx].size() == wire::kTokenSize;
    wire::PutToken(
        has ? reinterpret_cast<const uint8_t*>((*tokens)[idx].data()) : nullptr,
        p);
    p += wire::kTokenSize;
  }
  std::vector<iovec> iov(1, Iov(request.data(), request.size()));
  if (!TransferAll(link, iov, /*sending=*/true, "send request", failure)) {
    return false;
  }

  wire::Header rh;
  std::vector<ErrorCode> codes;
  size_t no_data = 0;
  if (!ReceiveHead(link, h.op, n, &rh, &codes, {}, &no_data, failure)) {
    return false;
  }
  if (rh.status != 0) {
    ErrorCode code = ErrorCodeFromInt(rh.status);
    // INVALID_PARAMS for the whole frame: the node has no prefetch handler
    // (it refuses keys one by one, and this client sends no bad ones).
    if (code == ErrorCode::INVALID_PARAMS) {
      *unsupported = true;
      code = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
    }
    for (uint32_t idx : batch) results[idx] = code;
    return true;
  }
  if (rh.body_len != uint64_t{n} * wire::kResultSize) {
    return ProtocolError(failure, "body length mismatch");
  }
  for (uint32_t i = 0; i < n; ++i) results[batch[i]] = codes[i];
  return true;
}

template std::vector<Batch> SplitRanges(std::span<const ReadOp>,
                                        const std::vector<uint32_t>&);
template std::vector<Batch> SplitRanges(std::span<const WriteOp>,
                                        const std::vector<uint32_t>&);
template bool ExchangeRanges(const Link&, std::span<ReadOp>, Batch, IoFailure*);
template bool ExchangeRanges(const Link&, std::span<WriteOp>, Batch,
                             IoFailure*);

}  // namespace kvpool::data_client
