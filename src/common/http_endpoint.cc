#include "common/http_endpoint.h"

#include <httplib.h>

namespace kvpool {

HttpEndpoint::HttpEndpoint(TextFn metrics, TextFn status_json)
    : metrics_(std::move(metrics)), status_(std::move(status_json)) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

Status HttpEndpoint::Start(const std::string& host, int port) {
  server_ = std::make_unique<httplib::Server>();
  server_->Get("/metrics",
               [this](const httplib::Request&, httplib::Response& res) {
                 res.set_content(metrics_(), "text/plain; version=0.0.4");
               });
  server_->Get("/status",
               [this](const httplib::Request&, httplib::Response& res) {
                 res.set_content(status_(), "application/json");
               });
  if (port == 0) {
    port_ = server_->bind_to_any_port(host.c_str());
  } else {
    port_ = server_->bind_to_port(host.c_str(), port) ? port : -1;
  }
  if (port_ <= 0) {
    return Status(
        ErrorCode::INTERNAL_ERROR,
        "cannot bind HTTP endpoint on " + host + ":" + std::to_string(port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::OK();
}

void HttpEndpoint::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace kvpool
