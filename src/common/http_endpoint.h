// The HTTP side door of a server process: Prometheus text at /metrics and a
// JSON document at /status. Binds 127.0.0.1 by default. Port 0 picks a free
// port (see port()).
#ifndef KVPOOL_COMMON_HTTP_ENDPOINT_H_
#define KVPOOL_COMMON_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kvpool/status.h"

namespace httplib {
class Server;
}

namespace kvpool {

class HttpEndpoint {
 public:
  using TextFn = std::function<std::string()>;
  HttpEndpoint(TextFn metrics, TextFn status_json);
  ~HttpEndpoint();
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }

 private:
  TextFn metrics_;
  TextFn status_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_COMMON_HTTP_ENDPOINT_H_
