// TcpDataServer's connections: the accept loop (which hands each new
// connection to an I/O thread, round robin), the connection limit (the
// session idle the longest makes room), the idle sweep, and rate-limited
// warnings. What a connection does once accepted is in
// tcp_data_server_session.cc.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "transport/tcp_data_server_impl.h"

namespace kvpool {

using data_server::SteadyNowMs;

asio::awaitable<void> TcpDataServer::Impl::AcceptLoop(tcp::acceptor& acceptor) {
  for (;;) {
    asio::error_code ec;
    // Sessions told to close still hold their descriptors: let them go
    // before taking more, or a flood of connections runs the process out
    // of file descriptors faster than evictions free them.
    while (ClosingSessions() > 32) {
      asio::steady_timer pause(acceptor.get_executor(),
                               std::chrono::milliseconds(1));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (!acceptor.is_open()) co_return;
    }
    asio::io_context& home = *ios_[next_io_];
    next_io_ = (next_io_ + 1) % ios_.size();
    tcp::socket socket = co_await acceptor.async_accept(
        home, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) {
        co_return;
      }
      // Typically EMFILE: back off instead of spinning on the same error.
      WarnLimited(&last_accept_log_ms_, &accept_log_held_,
                  "accept failed: " + ec.message() +
                      " (retrying every 50 ms; new clients wait meanwhile)");
      asio::steady_timer timer(acceptor.get_executor(),
                               std::chrono::milliseconds(50));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (!Admit()) {
      stats_.connections_refused.fetch_add(1, std::memory_order_relaxed);
      WarnLimited(&last_limit_log_ms_, &limit_log_held_,
                  "at its limit of " + std::to_string(max_connections_) +
                      " connections, all busy: refusing new ones");
      socket.close(ec);
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    // Detects peers that vanished mid-frame so their sessions do not linger.
    socket.set_option(asio::socket_base::keep_alive(true), ec);
    // Registered here, not when the session starts running, so the next
    // accept already counts it.
    auto slot = std::make_shared<SessionSlot>();
    slot->ex = socket.get_executor();
    slot->last_active_ms.store(SteadyNowMs());
    SessionList::iterator where;
    {
      std::lock_guard lock(sessions_mu_);
      where = sessions_.insert(sessions_.end(), slot);
    }
    auto ex = socket.get_executor();
    if (tls_) {
      asio::co_spawn(
          ex,
          Serve(TlsStream(std::move(socket), *tls_), std::move(slot), where),
          asio::detached);
    } else {
      asio::co_spawn(ex, Serve(std::move(socket), std::move(slot), where),
                     asio::detached);
    }
  }
}

bool TcpDataServer::Impl::Admit() {
  std::shared_ptr<SessionSlot> victim;
  {
    std::lock_guard lock(sessions_mu_);
    if (sessions_.size() - closing_sessions_ < max_connections_) return true;
    // The session idle the longest makes room: a crowd of idle sockets
    // cannot lock new clients out, it only shortens its own members' lives.
    int64_t oldest = INT64_MAX;
    for (const auto& slot : sessions_) {
      if (slot->closing.load() || slot->busy.load() ||
          !slot->between_frames.load()) {
        continue;
      }
      const int64_t t = slot->last_active_ms.load();
      if (t < oldest) {
        oldest = t;
        victim = slot;
      }
    }
    if (!victim) return false;
    victim->closing.store(true);
    ++closing_sessions_;
  }
  stats_.connections_evicted.fetch_add(1, std::memory_order_relaxed);
  WarnLimited(&last_limit_log_ms_, &limit_log_held_,
              "at its limit of " + std::to_string(max_connections_) +
                  " connections: closing the longest idle ones for new "
                  "clients");
  CloseSession(victim);
  return true;
}

void TcpDataServer::Impl::CloseSession(
    const std::shared_ptr<SessionSlot>& slot) {
  asio::post(slot->ex, [slot] {
    if (!slot->alive || slot->socket == nullptr) return;
    asio::error_code ec;
    slot->socket->shutdown(tcp::socket::shutdown_both, ec);
    slot->socket->close(ec);
  });
}

void TcpDataServer::Impl::WarnLimited(std::atomic<int64_t>* last_ms,
                                      std::atomic<uint64_t>* held,
                                      const std::string& what) {
  const int64_t now = SteadyNowMs();
  int64_t last = last_ms->load();
  if (now - last < 10000 || !last_ms->compare_exchange_strong(last, now)) {
    held->fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t swallowed = held->exchange(0);
  spdlog::warn("data server {}: {}{}", node_id_, what,
               swallowed ? " (" + std::to_string(swallowed) +
                               " more like this in the last 10 s)"
                         : std::string());
}

asio::awaitable<void> TcpDataServer::Impl::SweepIdle() {
  const auto period = std::chrono::milliseconds(
      std::clamp<int64_t>(idle_timeout_ms_ / 4, 10, 1000));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(period);
    asio::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    const int64_t now = SteadyNowMs();
    std::vector<std::shared_ptr<SessionSlot>> idle;
    {
      std::lock_guard lock(sessions_mu_);
      for (const auto& slot : sessions_) {
        if (slot->closing.load() || slot->busy.load() ||
            now - slot->last_active_ms.load() < idle_timeout_ms_) {
          continue;
        }
        slot->closing.store(true);
        ++closing_sessions_;
        idle.push_back(slot);
      }
    }
    for (const auto& slot : idle) CloseSession(slot);
    stats_.idle_closed.fetch_add(idle.size(), std::memory_order_relaxed);
  }
}

}  // namespace kvpool
