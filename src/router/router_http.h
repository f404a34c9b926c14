// The HTTP face of kvpool::Router (the kvpool-router service): JSON in and
// out over cpp-httplib. A class rather than code in main() so tests can run
// it in-process on a free port.
//
//   POST /route     {"request_id", "tenant"?, "block_keys": [...]} -> decision
//   POST /complete  {"engine_id"}                                   -> load
//   POST /queue     {"engine_id", "waiting"}  the engine's waiting count
//                   (Router::ReportQueue)                     -> the count
//   GET  /stats     router counters, per-engine in-flight counts and last
//                   reported queue (null before the first report)
//   GET  /healthz   liveness of the router process (not of the master)
//
// Errors are {"error": message, "code": name}: 400 for malformed JSON,
// missing fields and INVALID_PARAMS, 404 for an unknown engine, 503 when the
// master cannot be reached, 500 otherwise. Requests beyond the HttpLimits
// (common/http_limits.h, docs/security.md) are refused before any handler
// with the same shape of body: 408, 413, 414, 415, 431, 501, or 503 when
// every worker and queue slot is in use.
#ifndef KVPOOL_ROUTER_ROUTER_HTTP_H_
#define KVPOOL_ROUTER_ROUTER_HTTP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/http_limits.h"
#include "kvpool/router.h"
#include "kvpool/status.h"

namespace kvpool {

class BoundedHttpServer;

// "IN_MEMORY", "QUEUED", "THROTTLED_WATERMARK", "THROTTLED_CAP",
// "NO_LOCAL_DISK", "NOT_FOUND" (the RFC's names).
const char* PrefetchStatusName(PrefetchToMemoryStatus s);

// Parses "id=e0,nodes=node0;node1,endpoint=http://10.0.0.5:8000" (nodes and
// endpoint optional). INVALID_PARAMS with the reason otherwise.
Result<EngineInfo> ParseEngineSpec(const std::string& spec);

class RouterHttpServer {
 public:
  // HttpLimits() with the router's body cap (a /route body may carry up to
  // 65536 keys of up to 4 KiB; real prompts are far smaller, and the cap
  // bounds what one request can make the router buffer) and httplib's own
  // worker count, max(8, cores - 1), which the router had before limits.
  static HttpLimits DefaultHttpLimits();

  // `router` must outlive the server.
  explicit RouterHttpServer(Router* router,
                            HttpLimits limits = DefaultHttpLimits());
  ~RouterHttpServer();
  RouterHttpServer(const RouterHttpServer&) = delete;
  RouterHttpServer& operator=(const RouterHttpServer&) = delete;

  // Binds (port 0 = any free port) and serves on a background thread.
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }
  const HttpLimits& limits() const { return limits_; }
  // Zeros before Start().
  HttpServerStats http_stats() const;

  // The handlers, without the socket: HTTP status and JSON body.
  struct Reply {
    int status = 200;
    std::string body;
  };
  Reply HandleRoute(const std::string& body);
  Reply HandleComplete(const std::string& body);
  // "waiting" must be an integer in [0, kMaxReportedWaiting].
  static constexpr int64_t kMaxReportedWaiting = 1000000;
  Reply HandleQueue(const std::string& body);
  // Carries an "http" object with http_stats() once started.
  Reply HandleStats() const;

 private:
  Router* router_;
  const HttpLimits limits_;
  std::unique_ptr<BoundedHttpServer> server_;
  int port_ = -1;
};

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_ROUTER_HTTP_H_
