// An httplib::Server whose connections are served under HttpLimits: request
// heads are checked while they arrive (so a 64 MiB URL costs a few KiB, not
// the whole line), every request and response has a deadline as a whole (not
// per recv), and connections beyond the workers queue, within a bound, or get
// 503.
//
// httplib (Debian's 0.11.4 is a compiled library, so its CPPHTTPLIB_* limits
// are fixed at 8192-byte lines and per-recv timeouts) still parses requests
// and runs the handlers: this class owns the accept-to-close path of each
// connection and hands httplib a Stream that yields only what the limits
// allow. Only the two .cc files that set up a server include this header.
#ifndef KVPOOL_COMMON_BOUNDED_HTTP_SERVER_H_
#define KVPOOL_COMMON_BOUNDED_HTTP_SERVER_H_

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/http_limits.h"
#include "kvpool/status.h"

namespace kvpool {

class BoundedHttpServer : public httplib::Server {
 public:
  explicit BoundedHttpServer(const HttpLimits& limits);
  ~BoundedHttpServer() override;
  BoundedHttpServer(const BoundedHttpServer&) = delete;
  BoundedHttpServer& operator=(const BoundedHttpServer&) = delete;

  // Checks the limits, binds (port 0 = any free port) and serves on
  // background threads. Routes must be registered before.
  Status Start(const std::string& host, int port);
  // Closes the listener and every connection; returns once all threads are
  // gone. Safe to call more than once, and before Start.
  void Stop();
  int port() const { return port_; }
  HttpServerStats stats() const;
  const HttpLimits& limits() const { return limits_; }

 private:
  class Connection;
  struct Pending {
    int fd;
    std::chrono::steady_clock::time_point accepted;
  };

  // Called by httplib's accept loop for each new socket (the task queue runs
  // it inline): queues it for a worker or refuses it.
  bool process_and_close_socket(socket_t sock) override;
  void WorkerLoop();
  void Serve(int fd, std::chrono::steady_clock::time_point accepted);
  // Someone is waiting for a worker that no idle worker will pick up.
  bool Pressure() const;

  const HttpLimits limits_;
  int port_ = -1;
  std::thread accept_thread_;
  std::vector<std::thread> workers_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // guarded by mu_
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> idle_{0};
  std::atomic<uint64_t> active_{0};

  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> rejected_busy_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> timed_out_{0};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_BOUNDED_HTTP_SERVER_H_
