// The TCP data server's READ and WRITE frames: ranges of segments, each
// checked against its capability token and its segment, then moved straight
// between socket and segment memory. A WRITE is ordered by its grant's
// generation (transport/write_order.h): a stale one is refused, and one
// that overlaps an older write still copying waits for it.
#include <algorithm>

#include "transport/tcp_data_server_impl.h"

namespace kvpool {

using data_server::kDiscardChunk;
using data_server::Lowest;
using data_server::SteadyNowMs;
using data_server::TransferWhole;

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServeRanges(Stream& socket,
                                                       const wire::Header& h,
                                                       SessionSlot& slot,
                                                       SessionState& st) {
  if (!st.request_hold.Resize(uint64_t{h.count} * wire::kRangeSize)) {
    co_return co_await RefuseOverBudget(socket, h, st);
  }
  asio::error_code ec;
  st.ranges_raw.resize(size_t{h.count} * wire::kRangeSize);
  co_await asio::async_read(socket, asio::buffer(st.ranges_raw),
                            TransferWhole{},
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return false;
  slot.last_active_ms.store(SteadyNowMs());
  if (const char* why = ResolveRanges(h, st)) {
    BadFrame(Lowest(socket), why);
    co_return false;
  }
  if (static_cast<wire::Op>(h.op) == wire::Op::kRead) {
    co_return co_await ServeRead(socket, h, st);
  }
  // An older write of an overlapping range may still be copying: this
  // one's bytes go in after it has finished, never mixed with its stale
  // ones. Bounded by that write's own transfer (its session ends at the
  // latest when idle_timeout_ms closes it).
  if (st.write_pass.blocked()) co_await WaitForOlderWrites(slot, st);
  co_return co_await ServeWrite(socket, h, st);
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServeRead(Stream& socket,
                                                     const wire::Header& h,
                                                     SessionState& st) {
  asio::error_code ec;
  // Header, codes and the accepted ranges go out in one gathered write
  // straight from segment memory.
  uint64_t data_len = 0;
  st.out.clear();
  st.out.emplace_back();  // response header + codes, filled in below
  for (uint32_t i = 0; i < h.count; ++i) {
    if (st.targets[i] == nullptr) continue;
    st.out.emplace_back(st.targets[i], st.ranges[i].length);
    data_len += st.ranges[i].length;
  }
  PrepareResponse(h, ErrorCode::OK, data_len, st);
  st.out[0] = asio::buffer(st.response);
  co_await asio::async_write(socket, st.out, TransferWhole{},
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return false;
  st.pins.Release();
  stats_.bytes_read.fetch_add(data_len, std::memory_order_relaxed);
  ObserveRequest(kReadRequest, st, data_len);
  co_return true;
}

asio::awaitable<void> TcpDataServer::Impl::WaitForOlderWrites(
    SessionSlot& slot, SessionState& st) {
  stats_.write_generation_waits.fetch_add(1, std::memory_order_relaxed);
  slot.busy.store(true);
  const auto ex = co_await asio::this_coro::executor;
  co_await asio::async_initiate<const asio::use_awaitable_t<>, void()>(
      [this, &st, ex](auto handler) {
        auto resume = std::make_shared<decltype(handler)>(std::move(handler));
        auto post = [ex, resume] {
          asio::post(ex, [resume] {
            auto& resume_session = *resume;
            resume_session();
          });
        };
        if (!write_order_.Wait(st.write_pass, post)) post();
      },
      asio::use_awaitable);
  slot.busy.store(false);
  slot.last_active_ms.store(SteadyNowMs());
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServeWrite(Stream& socket,
                                                      const wire::Header& h,
                                                      SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  // Payloads of accepted ops are read straight into the segment; a
  // rejected op's payload is drained so the next op's bytes line up.
  uint64_t written = 0;
  st.in.clear();
  for (uint32_t i = 0; i <= h.count; ++i) {
    const bool at_end = i == h.count;
    if (!at_end && st.targets[i] != nullptr) {
      st.in.emplace_back(st.targets[i], st.ranges[i].length);
      written += st.ranges[i].length;
      continue;
    }
    if (!st.in.empty()) {
      co_await asio::async_read(socket, st.in, TransferWhole{}, token);
      if (ec) co_return false;
      st.in.clear();
    }
    if (at_end) break;
    if (!st.scratch) st.scratch.reset(new uint8_t[kDiscardChunk]);
    for (uint64_t left = st.ranges[i].length; left > 0;) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(left, kDiscardChunk));
      co_await asio::async_read(socket, asio::buffer(st.scratch.get(), n),
                                TransferWhole{}, token);
      if (ec) co_return false;
      left -= n;
    }
  }
  // Every byte has landed: newer writes of these ranges may go ahead, and
  // the segments may be taken back.
  st.write_pass.Release();
  st.pins.Release();
  stats_.bytes_written.fetch_add(written, std::memory_order_relaxed);
  PrepareResponse(h, ErrorCode::OK, 0, st);
  co_await asio::async_write(socket, asio::buffer(st.response), TransferWhole{},
                             token);
  if (ec) co_return false;
  ObserveRequest(kWriteRequest, st, written);
  co_return true;
}

const char* TcpDataServer::Impl::ResolveRanges(const wire::Header& h,
                                               SessionState& st) {
  st.ranges.resize(h.count);
  st.targets.resize(h.count);
  st.range_codes.assign(h.count, ErrorCode::OK);
  uint64_t total = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    const wire::Range r =
        wire::DecodeRange(st.ranges_raw.data() + i * wire::kRangeSize);
    // Checked before summing so the sum cannot overflow.
    if (r.length > wire::kMaxPayload || total + r.length > wire::kMaxPayload) {
      return "total length over limit";
    }
    total += r.length;
    st.ranges[i] = r;
  }
  if (static_cast<wire::Op>(h.op) == wire::Op::kWrite &&
      total != h.body_len - uint64_t{h.count} * wire::kRangeSize) {
    return "payload length does not match the ranges";
  }
  // Only now, with the whole frame known to be well formed, are ranges
  // resolved; a malformed frame never reaches segment memory.
  bool locked = false;
  uint64_t epoch = 0;
  const std::shared_ptr<const cap::Key> key = CapKey(&locked, &epoch);
  const uint32_t want = static_cast<wire::Op>(h.op) == wire::Op::kRead
                            ? cap::kOpRead
                            : cap::kOpWrite;
  const int64_t now = key ? cap::WallNowMs() : 0;
  uint64_t rejected = 0, refused = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    const wire::Range& r = st.ranges[i];
    ErrorCode code = locked ? ErrorCode::ILLEGAL_CLIENT : ErrorCode::OK;
    if (locked) ++refused;
    if (key) {
      // The token is checked first: without a grant, whether a segment id
      // exists or a range fits is not the client's business.
      code = !wire::InsideGrant(r)
                 ? ErrorCode::ILLEGAL_CLIENT
                 : key->VerifyRange(r.token, r.segment_id, r.grant_offset,
                                    r.grant_length, want, now,
                                    capability_skew_ms_);
      if (code != ErrorCode::OK) ++refused;
    }
    // A zero-length range names no bytes; rejecting it keeps "OK" meaning
    // "these bytes were moved".
    uint8_t* p =
        code != ErrorCode::OK || r.length == 0
            ? nullptr
            : segments_->Resolve(r.segment_id, r.offset, r.length, &st.pins);
    if (p != nullptr && want == cap::kOpWrite && write_guard_ &&
        !write_guard_(r.segment_id, r.offset, r.length)) {
      p = nullptr;
      code = ErrorCode::INVALID_WRITE;
      stats_.write_guard_refusals.fetch_add(1, std::memory_order_relaxed);
    }
    st.targets[i] = p;
    if (p == nullptr) {
      ++rejected;
      st.range_codes[i] =
          code != ErrorCode::OK ? code : ErrorCode::INVALID_PARAMS;
    }
  }
  // Only a verified token's generation means anything: without a key,
  // writes are not ordered.
  if (key && want == cap::kOpWrite) OrderWrites(epoch, st, &rejected);
  if (rejected > 0) {
    stats_.rejected_ranges.fetch_add(rejected, std::memory_order_relaxed);
  }
  if (refused > 0) {
    stats_.capability_refusals.fetch_add(refused, std::memory_order_relaxed);
  }
  return nullptr;
}

void TcpDataServer::Impl::OrderWrites(uint64_t epoch, SessionState& st,
                                      uint64_t* rejected) {
  st.order_ops.clear();
  st.order_index.clear();
  bool ordered = false;
  for (uint32_t i = 0; i < st.targets.size(); ++i) {
    if (st.targets[i] == nullptr) continue;
    const wire::Range& r = st.ranges[i];
    const uint64_t generation = cap::TokenGeneration(r.token);
    ordered = ordered || generation != 0;
    st.order_ops.push_back(WriteOrder::Op{r.segment_id, r.offset, r.length,
                                          r.grant_offset, r.grant_length,
                                          generation});
    st.order_index.push_back(i);
  }
  // Tokens of a master before write generations: nothing to order, and no
  // lock taken.
  if (!ordered) return;
  st.write_pass = write_order_.Admit(epoch, st.order_ops);
  uint64_t refused = 0;
  for (size_t j = 0; j < st.order_ops.size(); ++j) {
    if (st.order_ops[j].admitted) continue;
    const uint32_t i = st.order_index[j];
    st.targets[i] = nullptr;
    st.range_codes[i] = ErrorCode::INVALID_WRITE;
    ++refused;
  }
  if (refused > 0) {
    *rejected += refused;
    stats_.write_generation_refusals.fetch_add(refused,
                                               std::memory_order_relaxed);
  }
}

void TcpDataServer::Impl::PrepareResponse(const wire::Header& h,
                                          ErrorCode status, uint64_t data_len,
                                          SessionState& st) {
  const uint32_t count = status == ErrorCode::OK ? h.count : 0;
  st.response.resize(wire::kHeaderSize + size_t{count} * wire::kResultSize);
  wire::Header rh;
  rh.op = h.op;
  rh.count = count;
  rh.status = ToInt(status);
  rh.body_len = uint64_t{count} * wire::kResultSize + data_len;
  wire::EncodeHeader(rh, st.response.data());
  uint8_t* codes = st.response.data() + wire::kHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    const ErrorCode code =
        st.targets[i] != nullptr ? ErrorCode::OK : st.range_codes[i];
    wire::PutLe<uint32_t>(codes + i * wire::kResultSize,
                          static_cast<uint32_t>(ToInt(code)));
  }
}

// The session loop (tcp_data_server_session.cc) serves both kinds of
// stream.
template asio::awaitable<bool> TcpDataServer::Impl::ServeRanges(
    tcp::socket&, const wire::Header&, SessionSlot&, SessionState&);
template asio::awaitable<bool> TcpDataServer::Impl::ServeRanges(
    TlsStream&, const wire::Header&, SessionSlot&, SessionState&);

}  // namespace kvpool
