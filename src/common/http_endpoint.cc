#include "common/http_endpoint.h"

#include "common/bounded_http_server.h"

namespace kvpool {

namespace {

// The endpoint's own limits, so that an operator sees refusals on the same
// scrape that would otherwise be the one failing.
std::string RenderHttpStats(const HttpServerStats& s) {
  std::string out =
      "# HELP kvpool_http_connections_total Connections accepted by the HTTP "
      "endpoint.\n"
      "# TYPE kvpool_http_connections_total counter\n"
      "kvpool_http_connections_total " +
      std::to_string(s.accepted) +
      "\n"
      "# HELP kvpool_http_refused_total Connections and requests the HTTP "
      "endpoint refused: busy (503), limit (4xx), timeout (408 or close).\n"
      "# TYPE kvpool_http_refused_total counter\n";
  out += "kvpool_http_refused_total{reason=\"busy\"} " +
         std::to_string(s.rejected_busy) + "\n";
  out += "kvpool_http_refused_total{reason=\"limit\"} " +
         std::to_string(s.refused) + "\n";
  out += "kvpool_http_refused_total{reason=\"timeout\"} " +
         std::to_string(s.timed_out) + "\n";
  return out;
}

}  // namespace

HttpEndpoint::HttpEndpoint(TextFn metrics, TextFn status_json,
                           HttpLimits limits)
    : metrics_(std::move(metrics)),
      status_(std::move(status_json)),
      limits_(limits) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

void HttpEndpoint::AddTextRoute(const std::string& path, RouteFn fn) {
  routes_.emplace_back(path, std::move(fn));
}

Status HttpEndpoint::Start(const std::string& host, int port) {
  Stop();
  server_ = std::make_unique<BoundedHttpServer>(limits_);
  server_->Get("/metrics",
               [this](const httplib::Request&, httplib::Response& res) {
                 res.set_content(metrics_() + RenderHttpStats(http_stats()),
                                 "text/plain; version=0.0.4");
               });
  server_->Get("/status",
               [this](const httplib::Request&, httplib::Response& res) {
                 res.set_content(status_(), "application/json");
               });
  for (const auto& [path, fn] : routes_) {
    server_->Get(
        path, [fn = fn](const httplib::Request& req, httplib::Response& res) {
          Params params;
          for (const auto& [k, v] : req.params) params.emplace(k, v);
          std::string body;
          res.status = fn(params, &body);
          res.set_content(body, "text/plain; version=0.0.4");
        });
  }
  if (Status s = server_->Start(host, port); !s.ok()) {
    server_.reset();
    port_ = -1;
    return Status(s.code(), "HTTP endpoint: " + s.message());
  }
  port_ = server_->port();
  return Status::OK();
}

void HttpEndpoint::Stop() {
  if (server_) server_->Stop();
}

HttpServerStats HttpEndpoint::http_stats() const {
  return server_ ? server_->stats() : HttpServerStats();
}

}  // namespace kvpool
