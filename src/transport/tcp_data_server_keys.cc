// The TCP data server's SSD_READ and PREFETCH frames: ops that name values
// by tenant and key rather than by range. SSD_READ runs the node's SSD read
// handler on the blocking pool (the session waits, its I/O thread does not)
// and sends the values straight from the buffer it filled; PREFETCH hands
// the keys to the node's prefetch handler and answers per key.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <span>
#include <string_view>

#include "common/io_memory.h"
#include "transport/tcp_data_server_impl.h"

namespace kvpool {

using data_server::kKeepRequestBytes;
using data_server::kNoOp;
using data_server::Lowest;
using data_server::PeerName;
using data_server::SteadyNowMs;
using data_server::TransferWhole;

namespace {

// A session keeps an SSD read buffer up to this size for its next read.
constexpr size_t kKeepSsdBufferBytes = 64ull << 20;

// Reads a u32 length and that many bytes at `*pos` of `body`, advancing
// `*pos`. False if the body ends first.
bool TakeLengthPrefixed(const std::vector<uint8_t>& body, size_t* pos,
                        std::string* out) {
  if (body.size() - *pos < wire::kLenPrefixSize) return false;
  const uint32_t len = wire::GetLe<uint32_t>(body.data() + *pos);
  *pos += wire::kLenPrefixSize;
  if (body.size() - *pos < len) return false;
  out->assign(reinterpret_cast<const char*>(body.data() + *pos), len);
  *pos += len;
  return true;
}

}  // namespace

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServeKeys(Stream& socket,
                                                     const wire::Header& h,
                                                     SessionSlot& slot,
                                                     SessionState& st) {
  const bool ssd_read = static_cast<wire::Op>(h.op) == wire::Op::kSsdRead;
  // Without the op's handler (e.g. a node without an SSD tier) the op is
  // refused cleanly and the connection stays usable.
  if (ssd_read ? !ssd_read_handler_ : !prefetch_handler_) {
    co_return co_await RefuseOp(socket, h, st);
  }
  if (h.body_len > max_key_frame_body_) {
    BadFrame(Lowest(socket), "body over the server's limit");
    co_return false;
  }
  if (!st.request_hold.Resize(h.body_len)) {
    co_return co_await RefuseOverBudget(socket, h, st);
  }
  // Memory grows with the bytes that arrive, not with what a header
  // announces.
  asio::error_code ec;
  st.body.clear();
  for (uint64_t got = 0; got < h.body_len;) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(h.body_len - got, 64 << 10));
    st.body.resize(static_cast<size_t>(got) + n);
    co_await asio::async_read(socket, asio::buffer(st.body.data() + got, n),
                              TransferWhole{},
                              asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;
    got += n;
    slot.last_active_ms.store(SteadyNowMs());
  }
  slot.busy.store(true);
  const bool go_on = ssd_read ? co_await ServeSsdRead(socket, h, st)
                              : co_await ServePrefetch(socket, h, st);
  slot.busy.store(false);
  slot.last_active_ms.store(SteadyNowMs());
  if (!go_on) co_return false;
  // An idle connection does not keep a big request's memory.
  if (st.body.capacity() > kKeepRequestBytes) st.body = {};
  if (st.key_ops.capacity() > 1024) st.key_ops = {};
  if (st.keys.capacity() > 1024) st.keys = {};
  co_return true;
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServeSsdRead(Stream& socket,
                                                        const wire::Header& h,
                                                        SessionState& st) {
  asio::error_code ec;
  auto token = asio::redirect_error(asio::use_awaitable, ec);
  ErrorCode refusal = ErrorCode::OK;
  if (const char* why = ParseSsdRead(h, st, &refusal)) {
    BadFrame(Lowest(socket), why);
    co_return false;
  }
  if (refusal != ErrorCode::OK) {
    spdlog::warn(
        "data server {}: SSD_READ of {} ops from {} refused (a key or tenant "
        "of bad length, or more than {} bytes in total)",
        node_id_, h.count, PeerName(socket), max_ssd_read_bytes_);
    PrepareResponse(h, refusal, 0, st);
    co_await asio::async_write(socket, asio::buffer(st.response),
                               TransferWhole{}, token);
    co_return !ec;
  }

  if (!st.key_ops.empty()) {
    // The handler blocks on disk I/O: it runs on an SSD read thread while
    // this session is suspended, and the session resumes on its own
    // executor. Nothing else touches `st` meanwhile.
    const auto ex = co_await asio::this_coro::executor;
    co_await asio::async_initiate<const asio::use_awaitable_t<>, void()>(
        [this, &st, ex](auto handler) {
          auto resume = std::make_shared<decltype(handler)>(std::move(handler));
          ssd_pool_->Submit([this, &st, ex, resume] {
            RunSsdRead(st);
            asio::post(ex, [resume] {
              auto& resume_session = *resume;
              resume_session();
            });
          });
        },
        asio::use_awaitable);
  }

  const uint64_t data_len = PrepareSsdReadReply(h, st);
  co_await asio::async_write(socket, st.out, TransferWhole{}, token);
  // Keep a moderate buffer for the session's next read; give back big ones.
  if (st.ssd_buffer_capacity > kKeepSsdBufferBytes) {
    st.ssd_buffer.reset();
    st.ssd_buffer_capacity = 0;
    st.ssd_hold.Reset();
  }
  if (ec) co_return false;
  stats_.ssd_bytes_read.fetch_add(data_len, std::memory_order_relaxed);
  ObserveRequest(kSsdReadRequest, st, data_len);
  co_return true;
}

template <typename Stream>
asio::awaitable<bool> TcpDataServer::Impl::ServePrefetch(Stream& socket,
                                                         const wire::Header& h,
                                                         SessionState& st) {
  if (const char* why = ParsePrefetch(h, st)) {
    BadFrame(Lowest(socket), why);
    co_return false;
  }
  if (!st.keys.empty()) RunPrefetch(h, st);
  PrepareCodesResponse(h, 0, st);
  asio::error_code ec;
  co_await asio::async_write(socket, asio::buffer(st.response), TransferWhole{},
                             asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec;
}

const char* TcpDataServer::Impl::ParseSsdRead(const wire::Header& h,
                                              SessionState& st,
                                              ErrorCode* refusal) {
  *refusal = ErrorCode::OK;
  st.codes.assign(h.count, ErrorCode::OK);
  st.handler_index.assign(h.count, kNoOp);
  st.key_ops.clear();
  st.key_lengths.clear();
  st.key_offsets.clear();
  const std::vector<uint8_t>& body = st.body;
  size_t pos = 0;
  uint64_t slots = 0;
  bool over_limits = false;
  bool locked = false;
  const std::shared_ptr<const cap::Key> cap_key = CapKey(&locked);
  const int64_t now = cap_key ? cap::WallNowMs() : 0;
  uint64_t refused = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    if (body.size() - pos < wire::kKeyReadFixedSize) {
      return "key descriptor cut short";
    }
    const uint8_t* d = body.data() + pos;
    const uint64_t length = wire::GetLe<uint64_t>(d);
    const uint32_t tenant_len = wire::GetLe<uint32_t>(d + 8);
    const uint32_t key_len = wire::GetLe<uint32_t>(d + 12);
    const uint8_t* token = d + 16;
    pos += wire::kKeyReadFixedSize;
    if (body.size() - pos < uint64_t{tenant_len} + key_len) {
      return "key descriptor cut short";
    }
    const char* tenant = reinterpret_cast<const char*>(body.data() + pos);
    const char* key = tenant + tenant_len;
    pos += size_t{tenant_len} + key_len;
    if (over_limits) continue;  // only the structure matters any more
    if (tenant_len > wire::kMaxTenantSize || key_len == 0 ||
        key_len > wire::kMaxKeySize || length > wire::kMaxPayload) {
      over_limits = true;
      continue;
    }
    // Cannot overflow: at most 65536 slots of at most 16 GiB + 4 KiB.
    slots += wire::RoundUpToSsdAlign(length);
    if (length == 0) {
      // Names no bytes: rejected like a zero-length READ range.
      st.codes[i] = ErrorCode::INVALID_PARAMS;
      continue;
    }
    if (locked || cap_key) {
      const ErrorCode c =
          locked
              ? ErrorCode::ILLEGAL_CLIENT
              : cap_key->VerifyKey(token, std::string_view(tenant, tenant_len),
                                   std::string_view(key, key_len),
                                   cap::kOpSsdRead, now, capability_skew_ms_);
      if (c != ErrorCode::OK) {
        st.codes[i] = c;
        ++refused;
        continue;
      }
    }
    st.handler_index[i] = static_cast<uint32_t>(st.key_ops.size());
    KeyReadOp& op = st.key_ops.emplace_back();
    op.tenant.assign(tenant, tenant_len);
    op.key.assign(key, key_len);
    op.length = length;
  }
  if (pos != body.size()) return "body longer than its key descriptors";
  if (refused > 0) {
    stats_.capability_refusals.fetch_add(refused, std::memory_order_relaxed);
  }
  if (over_limits || slots > max_ssd_read_bytes_) {
    *refusal = ErrorCode::INVALID_PARAMS;
    st.key_ops.clear();
    return nullptr;
  }
  // Every slot starts 4096-aligned within a 4096-aligned buffer.
  uint64_t offset = 0;
  for (const KeyReadOp& op : st.key_ops) {
    st.key_lengths.push_back(op.length);
    st.key_offsets.push_back(offset);
    offset += wire::RoundUpToSsdAlign(op.length);
  }
  st.ssd_buffer_size = offset;
  return nullptr;
}

void TcpDataServer::Impl::RunSsdRead(SessionState& st) {
  const size_t size = static_cast<size_t>(
      std::max<uint64_t>(st.ssd_buffer_size, wire::kSsdReadAlign));
  // Reuse the session's buffer: a fresh allocation of this size is a fresh
  // mmap, and faulting its pages in costs more than the read on some VMs.
  if (!st.ssd_buffer || st.ssd_buffer_capacity < size) {
    static_assert(kIoAlign % wire::kSsdReadAlign == 0);
    st.ssd_buffer.reset();
    st.ssd_buffer_capacity = 0;
    if (!st.ssd_hold.Resize(size)) {
      st.ssd_hold.Reset();
      stats_.budget_refusals.fetch_add(1, std::memory_order_relaxed);
      WarnLimited(&last_budget_log_ms_, &budget_log_held_,
                  "requests in flight hold all of max_buffered_bytes: "
                  "refusing an SSD read of " +
                      std::to_string(size) + " bytes");
      for (KeyReadOp& op : st.key_ops)
        op.result = ErrorCode::NO_AVAILABLE_HANDLE;
      return;
    }
    void* p = AllocateIoMemory(size);
    if (p == nullptr) {
      spdlog::error("data server {}: cannot allocate {} bytes for an SSD read",
                    node_id_, size);
      for (KeyReadOp& op : st.key_ops) op.result = ErrorCode::INTERNAL_ERROR;
      return;
    }
    st.ssd_buffer.reset(static_cast<uint8_t*>(p));
    st.ssd_buffer_capacity = size;
  }
  for (size_t j = 0; j < st.key_ops.size(); ++j) {
    st.key_ops[j].dest = st.ssd_buffer.get() + st.key_offsets[j];
    // A handler that does not get to an op must not make it read as OK.
    st.key_ops[j].result = ErrorCode::INTERNAL_ERROR;
  }
  try {
    ssd_read_handler_(std::span<KeyReadOp>(st.key_ops));
  } catch (const std::exception& e) {
    spdlog::error("data server {}: SSD read handler threw: {}", node_id_,
                  e.what());
    for (KeyReadOp& op : st.key_ops) op.result = ErrorCode::INTERNAL_ERROR;
  } catch (...) {
    spdlog::error("data server {}: SSD read handler threw", node_id_);
    for (KeyReadOp& op : st.key_ops) op.result = ErrorCode::INTERNAL_ERROR;
  }
}

uint64_t TcpDataServer::Impl::PrepareSsdReadReply(const wire::Header& h,
                                                  SessionState& st) {
  // Header, codes and the bytes of the successful ops go out in one
  // gathered write straight from the buffer the handler filled.
  uint64_t data_len = 0;
  st.out.clear();
  st.out.emplace_back();  // response header + codes, filled in below
  for (uint32_t i = 0; i < h.count; ++i) {
    const uint32_t j = st.handler_index[i];
    if (j == kNoOp) continue;
    st.codes[i] = st.key_ops[j].result;
    if (st.codes[i] != ErrorCode::OK) continue;
    st.out.emplace_back(st.ssd_buffer.get() + st.key_offsets[j],
                        st.key_lengths[j]);
    data_len += st.key_lengths[j];
  }
  PrepareCodesResponse(h, data_len, st);
  st.out[0] = asio::buffer(st.response);
  return data_len;
}

const char* TcpDataServer::Impl::ParsePrefetch(const wire::Header& h,
                                               SessionState& st) {
  size_t pos = 0;
  if (!TakeLengthPrefixed(st.body, &pos, &st.tenant)) {
    return "PREFETCH tenant cut short";
  }
  const bool tenant_ok = st.tenant.size() <= wire::kMaxTenantSize;
  st.codes.assign(h.count, ErrorCode::OK);
  st.handler_index.assign(h.count, kNoOp);
  st.keys.clear();
  std::string key;
  bool locked = false;
  const std::shared_ptr<const cap::Key> cap_key = CapKey(&locked);
  const int64_t now = cap_key ? cap::WallNowMs() : 0;
  uint64_t refused = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    if (!TakeLengthPrefixed(st.body, &pos, &key) ||
        st.body.size() - pos < wire::kTokenSize) {
      return "PREFETCH key cut short";
    }
    const uint8_t* token = st.body.data() + pos;
    pos += wire::kTokenSize;
    if (!tenant_ok || key.empty() || key.size() > wire::kMaxKeySize) {
      st.codes[i] = ErrorCode::INVALID_PARAMS;
      continue;
    }
    if (locked || cap_key) {
      const ErrorCode c =
          locked ? ErrorCode::ILLEGAL_CLIENT
                 : cap_key->VerifyKey(token, st.tenant, key, cap::kOpPrefetch,
                                      now, capability_skew_ms_);
      if (c != ErrorCode::OK) {
        st.codes[i] = c;
        ++refused;
        continue;
      }
    }
    st.handler_index[i] = static_cast<uint32_t>(st.keys.size());
    st.keys.push_back(std::move(key));
  }
  if (pos != st.body.size()) return "body longer than its keys";
  if (refused > 0) {
    stats_.capability_refusals.fetch_add(refused, std::memory_order_relaxed);
  }
  return nullptr;
}

void TcpDataServer::Impl::RunPrefetch(const wire::Header& h, SessionState& st) {
  std::vector<ErrorCode> got;
  try {
    got = prefetch_handler_(
        st.tenant, st.keys,
        static_cast<wire::Op>(h.op) == wire::Op::kPrefetchForNextGet);
  } catch (const std::exception& e) {
    spdlog::error("data server {}: prefetch handler threw: {}", node_id_,
                  e.what());
    got.clear();
  } catch (...) {
    spdlog::error("data server {}: prefetch handler threw", node_id_);
    got.clear();
  }
  for (uint32_t i = 0; i < h.count; ++i) {
    const uint32_t j = st.handler_index[i];
    if (j == kNoOp) continue;
    st.codes[i] = j < got.size() ? got[j] : ErrorCode::INTERNAL_ERROR;
  }
  stats_.prefetch_keys.fetch_add(st.keys.size(), std::memory_order_relaxed);
}

void TcpDataServer::Impl::PrepareCodesResponse(const wire::Header& h,
                                               uint64_t data_len,
                                               SessionState& st) {
  const uint32_t count = static_cast<uint32_t>(st.codes.size());
  st.response.resize(wire::kHeaderSize + size_t{count} * wire::kResultSize);
  wire::Header rh;
  rh.op = h.op;
  rh.count = count;
  rh.body_len = uint64_t{count} * wire::kResultSize + data_len;
  wire::EncodeHeader(rh, st.response.data());
  uint8_t* codes = st.response.data() + wire::kHeaderSize;
  for (uint32_t i = 0; i < count; ++i) {
    wire::PutLe<uint32_t>(codes + i * wire::kResultSize,
                          static_cast<uint32_t>(ToInt(st.codes[i])));
  }
}

// The session loop (tcp_data_server_session.cc) serves both kinds of
// stream.
template asio::awaitable<bool> TcpDataServer::Impl::ServeKeys(
    tcp::socket&, const wire::Header&, SessionSlot&, SessionState&);
template asio::awaitable<bool> TcpDataServer::Impl::ServeKeys(
    TlsStream&, const wire::Header&, SessionSlot&, SessionState&);

}  // namespace kvpool
