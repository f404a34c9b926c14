// Helpers shared by the integration tests.
#ifndef KVPOOL_TESTS_TEST_UTIL_H_
#define KVPOOL_TESTS_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>

namespace kvpool::testing {

// Deterministic pseudo-random bytes, different per seed.
inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    std::memcpy(&s[i], &x, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

// A loopback port nothing listens on now (bound, then closed): connecting
// to it is refused, and a process may take it (tests accept that another
// may take it in between).
inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Polls `pred` until it holds or `timeout` passes; returns its last value.
inline bool WaitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace kvpool::testing

#endif  // KVPOOL_TESTS_TEST_UTIL_H_
