// Helpers shared by the integration tests.
#ifndef KVPOOL_TESTS_TEST_UTIL_H_
#define KVPOOL_TESTS_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
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

// `field` (an smaps line's name, "Rss:", "ShmemPmdMapped:") summed over
// this process's mappings of `path` (/proc/self/smaps), in bytes.
inline uint64_t MappedBytes(const std::string& path, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool ours = false;
  uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    // A mapping's header: "start-end perms offset dev inode   path".
    const auto sp = line.find(' ');
    if (sp != std::string::npos && line.find('-') < sp) {
      ours = line.size() >= path.size() &&
             line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (ours && line.rfind(field, 0) == 0) {
      kib += std::stoull(line.substr(field.size()));
    }
  }
  return kib << 10;
}

// Bytes of `path` this process has mapped in its page tables (the Rss of
// its mappings of that file): a page of a memory file is counted once some
// access in this process set it up, and a never-touched tmpfs page not at
// all, even after fallocate.
inline uint64_t MappedRssBytes(const std::string& path) {
  return MappedBytes(path, "Rss:");
}

}  // namespace kvpool::testing

#endif  // KVPOOL_TESTS_TEST_UTIL_H_
