// The HTTP face of kvpool::Router (the kvpool-router service): JSON in and
// out over cpp-httplib. A class rather than code in main() so tests can run
// it in-process on a free port.
//
//   POST /route     {"request_id", "tenant"?, "block_keys": [...]} -> decision
//   POST /complete  {"engine_id"}                                   -> load
//   GET  /stats     router counters and per-engine in-flight counts
//   GET  /healthz   liveness of the router process (not of the master)
//
// Errors are {"error": message, "code": name}: 400 for malformed JSON,
// missing fields and INVALID_PARAMS, 404 for an unknown engine, 503 when the
// master cannot be reached, 500 otherwise.
#ifndef KVPOOL_ROUTER_ROUTER_HTTP_H_
#define KVPOOL_ROUTER_ROUTER_HTTP_H_

#include <memory>
#include <string>
#include <thread>

#include "kvpool/router.h"
#include "kvpool/status.h"

namespace httplib {
class Server;
}

namespace kvpool {

// "IN_MEMORY", "QUEUED", "THROTTLED_WATERMARK", "THROTTLED_CAP",
// "NO_LOCAL_DISK", "NOT_FOUND" (the RFC's names).
const char* PrefetchStatusName(PrefetchToMemoryStatus s);

// Parses "id=e0,nodes=node0;node1,endpoint=http://10.0.0.5:8000" (nodes and
// endpoint optional). INVALID_PARAMS with the reason otherwise.
Result<EngineInfo> ParseEngineSpec(const std::string& spec);

class RouterHttpServer {
 public:
  // `router` must outlive the server.
  explicit RouterHttpServer(Router* router);
  ~RouterHttpServer();
  RouterHttpServer(const RouterHttpServer&) = delete;
  RouterHttpServer& operator=(const RouterHttpServer&) = delete;

  // Binds (port 0 = any free port) and serves on a background thread.
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }

  // The handlers, without the socket: HTTP status and JSON body.
  struct Reply {
    int status = 200;
    std::string body;
  };
  Reply HandleRoute(const std::string& body);
  Reply HandleComplete(const std::string& body);
  Reply HandleStats() const;

 private:
  Router* router_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = -1;
};

}  // namespace kvpool

#endif  // KVPOOL_ROUTER_ROUTER_HTTP_H_
