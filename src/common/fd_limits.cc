#include "common/fd_limits.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>

namespace kvpool {
namespace {

uint64_t Show(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : v; }

// ---- the guard's state: plain atomics, read on every accept4() ----

constexpr int kMaxGuarded = 8;
std::atomic<int> g_ports[kMaxGuarded];  // 0 = free slot
std::atomic<int> g_guarded{0};          // ports in the table
// An open descriptor of /dev/null, closed to make room for one accept when
// the table is full (-1: none at the moment).
std::atomic<int> g_reserve{-1};
std::atomic<uint64_t> g_shed_near_limit{0};
std::atomic<uint64_t> g_shed_table_full{0};
// Warnings at most once per 10 s, with what was shed meanwhile.
std::atomic<int64_t> g_last_warn_ms{0};
std::atomic<uint64_t> g_warned_total{0};

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

// The accept4 this file stands in front of: the next definition after the
// executable's (a sanitizer's interceptor, else libc's).
int RealAccept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  static const Accept4Fn next =
      reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  if (next != nullptr) return next(fd, addr, len, flags);
  return static_cast<int>(syscall(SYS_accept4, fd, addr, len, flags));
}

int LocalPort(int fd) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return -1;
  if (a.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  return -1;
}

bool IsGuarded(int fd) {
  const int port = LocalPort(fd);
  if (port <= 0) return false;
  for (const auto& p : g_ports) {
    if (p.load(std::memory_order_relaxed) == port) return true;
  }
  return false;
}

void OpenReserve() {
  if (g_reserve.load() >= 0) return;
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  int none = -1;
  if (!g_reserve.compare_exchange_strong(none, fd)) close(fd);
}

uint64_t SoftLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return UINT64_MAX;
  return rl.rlim_cur;
}

void WarnShed(const char* why) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = g_last_warn_ms.load();
  if (last != 0 && now - last < 10000) return;
  if (!g_last_warn_ms.compare_exchange_strong(last, now)) return;
  const uint64_t total = g_shed_near_limit.load() + g_shed_table_full.load();
  spdlog::warn(
      "rpc listener: out of file descriptors ({}): closing new connections "
      "at once (soft limit {}, {} kept free); {} closed so far, {} since "
      "the last warning",
      why, SoftLimit(), FdReserve(SoftLimit()), total,
      total - g_warned_total.exchange(total));
}

// The table is full: takes one connection off the backlog into the reserve
// descriptor's slot and closes it. False when there was none (the backlog
// is empty) or no reserve to give up.
bool ShedWithReserve(int listener) {
  const int reserve = g_reserve.exchange(-1);
  if (reserve < 0) {
    OpenReserve();  // for the next time, if a descriptor is free by now
    return false;
  }
  close(reserve);
  const int c = RealAccept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  const bool shed = c >= 0;
  if (shed) close(c);
  OpenReserve();
  return shed;
}

int GuardedAccept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  const socklen_t len_in = len != nullptr ? *len : 0;
  for (;;) {
    if (len != nullptr) *len = len_in;
    const int c = RealAccept4(fd, addr, len, flags);
    if (c >= 0) {
      const uint64_t soft = SoftLimit();
      if (soft == UINT64_MAX || uint64_t(c) + FdReserve(soft) < soft) {
        return c;
      }
      close(c);
      g_shed_near_limit.fetch_add(1, std::memory_order_relaxed);
      WarnShed("table nearly full");
      continue;  // the next one, until the backlog is empty
    }
    if (errno != EMFILE && errno != ENFILE) return -1;
    if (!ShedWithReserve(fd)) {
      // Nothing (more) to take: the caller waits for the next connection
      // instead of taking the listener down.
      errno = EAGAIN;
      return -1;
    }
    g_shed_table_full.fetch_add(1, std::memory_order_relaxed);
    WarnShed("table full");
  }
}

}  // namespace

OpenFileLimit RaiseOpenFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    spdlog::warn("open-file limit: getrlimit failed: {}", errno);
    return {};
  }
  OpenFileLimit out{Show(rl.rlim_cur), Show(rl.rlim_cur), Show(rl.rlim_max)};
  if (rl.rlim_cur != rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (raised.rlim_cur == RLIM_INFINITY) {
      // RLIMIT_NOFILE cannot go past fs.nr_open.
      uint64_t nr_open = 1 << 20;
      std::ifstream("/proc/sys/fs/nr_open") >> nr_open;
      raised.rlim_cur = nr_open;
    }
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      out.soft = Show(raised.rlim_cur);
    } else {
      spdlog::warn("open-file limit: cannot raise the soft limit {} to {}: {}",
                   out.soft_before, Show(raised.rlim_cur), errno);
    }
  }
  spdlog::info("open-file limit: soft {} (was {}), hard {}", out.soft,
               out.soft_before, out.hard);
  return out;
}

uint64_t FdReserve(uint64_t soft_limit) {
  return std::clamp<uint64_t>(soft_limit / 8, 16, 256);
}

bool GuardAccepts(int port) {
  if (port <= 0) return false;
  OpenReserve();
  for (auto& p : g_ports) {
    if (p.load() == port) return true;
  }
  for (auto& p : g_ports) {
    int free_slot = 0;
    if (p.compare_exchange_strong(free_slot, port)) {
      g_guarded.fetch_add(1);
      return true;
    }
  }
  return false;
}

void UnguardAccepts(int port) {
  for (auto& p : g_ports) {
    int mine = port;
    if (port > 0 && p.compare_exchange_strong(mine, 0)) g_guarded.fetch_sub(1);
  }
}

AcceptGuardStats GetAcceptGuardStats() {
  return {g_shed_near_limit.load(), g_shed_table_full.load()};
}

}  // namespace kvpool

// The process's accept4(): libgrpc's listeners call this one (see the
// header). Unguarded sockets go straight through.
extern "C" int accept4(int fd, sockaddr* __restrict addr,
                       socklen_t* __restrict len, int flags) {
  if (kvpool::g_guarded.load(std::memory_order_relaxed) == 0 ||
      !kvpool::IsGuarded(fd)) {
    return kvpool::RealAccept4(fd, addr, len, flags);
  }
  return kvpool::GuardedAccept4(fd, addr, len, flags);
}
