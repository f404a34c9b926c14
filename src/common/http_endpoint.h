// The HTTP side door of a server process: Prometheus text at /metrics and a
// JSON document at /status. Binds 127.0.0.1 by default. Port 0 picks a free
// port (see port()). Served under HttpLimits (common/http_limits.h); the
// endpoint takes no request bodies, hence the small default body cap.
#ifndef KVPOOL_COMMON_HTTP_ENDPOINT_H_
#define KVPOOL_COMMON_HTTP_ENDPOINT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/http_limits.h"
#include "kvpool/status.h"

namespace kvpool {

class BoundedHttpServer;

class HttpEndpoint {
 public:
  using TextFn = std::function<std::string()>;
  // A plain-text GET route: gets the query parameters, fills `body`,
  // returns the HTTP status.
  using Params = std::map<std::string, std::string>;
  using RouteFn = std::function<int(const Params&, std::string* body)>;
  HttpEndpoint(TextFn metrics, TextFn status_json,
               HttpLimits limits = HttpLimits());
  ~HttpEndpoint();
  // Before Start().
  void AddTextRoute(const std::string& path, RouteFn fn);
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }
  const HttpLimits& limits() const { return limits_; }
  // Zeros before Start().
  HttpServerStats http_stats() const;

 private:
  TextFn metrics_;
  TextFn status_;
  std::vector<std::pair<std::string, RouteFn>> routes_;
  const HttpLimits limits_;
  std::unique_ptr<BoundedHttpServer> server_;
  int port_ = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_HTTP_ENDPOINT_H_
