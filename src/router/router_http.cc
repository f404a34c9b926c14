#include "router/router_http.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/bounded_http_server.h"

namespace kvpool {

namespace {

using json = nlohmann::json;

// Never throws: a byte string that is not UTF-8 is replaced, not fatal.
std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

RouterHttpServer::Reply Error(int http_status, ErrorCode code,
                              const std::string& message) {
  json j = {{"error", message}, {"code", ErrorCodeName(code)}};
  return {http_status, Dump(j)};
}

int HttpStatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::INVALID_PARAMS:
    case ErrorCode::INVALID_KEY:
      return 400;
    case ErrorCode::RPC_FAIL:
      return 503;
    default:
      return 500;
  }
}

// Parses `body` as a JSON object; on failure fills `err` with a 400.
bool ParseObject(const std::string& body, json* out,
                 RouterHttpServer::Reply* err) {
  *out = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    *err = Error(400, ErrorCode::INVALID_PARAMS, "body is not valid JSON");
    return false;
  }
  if (!out->is_object()) {
    *err = Error(400, ErrorCode::INVALID_PARAMS, "body must be a JSON object");
    return false;
  }
  return true;
}

bool StringField(const json& j, const char* name, bool required,
                 std::string* out, RouterHttpServer::Reply* err) {
  auto it = j.find(name);
  if (it == j.end()) {
    if (!required) return true;
    *err = Error(400, ErrorCode::INVALID_PARAMS,
                 std::string("missing field \"") + name + "\"");
    return false;
  }
  if (!it->is_string()) {
    *err = Error(400, ErrorCode::INVALID_PARAMS,
                 std::string("field \"") + name + "\" must be a string");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

json DecisionJson(const RouteDecision& d, const Router& router) {
  json j;
  j["request_id"] = d.request_id;
  j["engine_id"] = d.engine_id;
  j["engine_endpoint"] = "";
  for (const auto& e : router.config().engines) {
    if (e.id == d.engine_id) j["engine_endpoint"] = e.endpoint;
  }
  j["affinity_hit"] = d.affinity_hit;
  j["matched_prefix"] = d.matched_prefix;
  json tiers = json::array();
  for (const auto& b : d.prefix_tiers) {
    tiers.push_back(
        {{"tier", b.tier}, {"node_id", b.node_id}, {"size", b.size}});
  }
  j["prefix_tiers"] = std::move(tiers);
  j["ssd_only_blocks"] = d.ssd_only_blocks;
  json prefetch = json::array();
  for (size_t i = 0; i < d.triggered_keys.size(); ++i) {
    prefetch.push_back(
        {{"key", d.triggered_keys[i]},
         {"status", i < d.prefetch_statuses.size()
                        ? PrefetchStatusName(d.prefetch_statuses[i])
                        : "UNKNOWN"}});
  }
  j["prefetch"] = std::move(prefetch);
  j["prefetch_disabled"] = d.prefetch_disabled;
  j["prefetch_deadline_ms"] = d.prefetch_deadline_ms;  // 0 = none
  if (!d.prefetch_error.empty()) j["prefetch_error"] = d.prefetch_error;
  return j;
}

}  // namespace

const char* PrefetchStatusName(PrefetchToMemoryStatus s) {
  switch (s) {
    case PrefetchToMemoryStatus::kInMemory:
      return "IN_MEMORY";
    case PrefetchToMemoryStatus::kQueued:
      return "QUEUED";
    case PrefetchToMemoryStatus::kThrottledWatermark:
      return "THROTTLED_WATERMARK";
    case PrefetchToMemoryStatus::kThrottledCap:
      return "THROTTLED_CAP";
    case PrefetchToMemoryStatus::kNoLocalDisk:
      return "NO_LOCAL_DISK";
    case PrefetchToMemoryStatus::kNotFound:
      return "NOT_FOUND";
  }
  return "UNKNOWN";
}

Result<EngineInfo> ParseEngineSpec(const std::string& spec) {
  EngineInfo e;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    std::string part = spec.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty()) continue;
    size_t eq = part.find('=');
    if (eq == std::string::npos) {
      return Status(ErrorCode::INVALID_PARAMS,
                    "engine spec '" + spec + "': '" + part + "' is not k=v");
    }
    std::string k = part.substr(0, eq), v = part.substr(eq + 1);
    if (k == "id") {
      e.id = v;
    } else if (k == "endpoint") {
      e.endpoint = v;
    } else if (k == "nodes") {
      size_t p = 0;
      while (p <= v.size()) {
        size_t q = v.find(';', p);
        if (q == std::string::npos) q = v.size();
        if (q > p) e.local_node_ids.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else if (k == "max_running" || k == "max_loading") {
      char* endp = nullptr;
      errno = 0;
      const long n = std::strtol(v.c_str(), &endp, 10);
      if (v.empty() || *endp != '\0' || errno != 0 || n < 0 || n > 1000000) {
        return Status(ErrorCode::INVALID_PARAMS,
                      "engine spec '" + spec + "': " + k + " '" + v +
                          "' is not a count in [0, 1000000]");
      }
      (k == "max_running" ? e.max_running : e.max_loading) = int(n);
    } else {
      return Status(ErrorCode::INVALID_PARAMS,
                    "engine spec '" + spec + "': unknown key '" + k +
                        "' (id, nodes, endpoint, max_running, max_loading)");
    }
  }
  if (e.id.empty()) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "engine spec '" + spec + "': id= is required");
  }
  return e;
}

HttpLimits RouterHttpServer::DefaultHttpLimits() {
  HttpLimits l;
  l.max_body_bytes = 64ull << 20;
  l.worker_threads = std::max(8u, std::thread::hardware_concurrency() > 0
                                      ? std::thread::hardware_concurrency() - 1
                                      : 0u);
  return l;
}

RouterHttpServer::RouterHttpServer(Router* router, HttpLimits limits)
    : router_(router), limits_(limits) {}

RouterHttpServer::~RouterHttpServer() { Stop(); }

RouterHttpServer::Reply RouterHttpServer::HandleRoute(const std::string& body) {
  json j;
  Reply err;
  if (!ParseObject(body, &j, &err)) return err;
  RouteRequest req;
  if (!StringField(j, "request_id", true, &req.request_id, &err)) return err;
  if (!StringField(j, "tenant", false, &req.tenant, &err)) return err;
  auto keys = j.find("block_keys");
  if (keys == j.end()) {
    return Error(400, ErrorCode::INVALID_PARAMS,
                 "missing field \"block_keys\"");
  }
  if (!keys->is_array()) {
    return Error(400, ErrorCode::INVALID_PARAMS,
                 "field \"block_keys\" must be an array of strings");
  }
  req.block_keys.reserve(keys->size());
  for (const auto& k : *keys) {
    if (!k.is_string()) {
      return Error(400, ErrorCode::INVALID_PARAMS,
                   "field \"block_keys\" must be an array of strings");
    }
    req.block_keys.push_back(k.get<std::string>());
  }
  auto d = router_->Route(req);
  if (!d.ok()) {
    return Error(HttpStatusFor(d.code()), d.code(), d.status().message());
  }
  return {200, Dump(DecisionJson(d.value(), *router_))};
}

RouterHttpServer::Reply RouterHttpServer::HandleComplete(
    const std::string& body) {
  json j;
  Reply err;
  if (!ParseObject(body, &j, &err)) return err;
  std::string id;
  if (!StringField(j, "engine_id", true, &id, &err)) return err;
  const auto& engines = router_->config().engines;
  for (size_t i = 0; i < engines.size(); ++i) {
    if (engines[i].id != id) continue;
    router_->Complete(id);
    auto st = router_->stats();
    json out = {{"engine_id", id}, {"in_flight", st.in_flight[i]}};
    return {200, Dump(out)};
  }
  return Error(404, ErrorCode::INVALID_PARAMS, "unknown engine '" + id + "'");
}

RouterHttpServer::Reply RouterHttpServer::HandleQueue(const std::string& body) {
  json j;
  Reply err;
  if (!ParseObject(body, &j, &err)) return err;
  std::string id;
  if (!StringField(j, "engine_id", true, &id, &err)) return err;
  auto w = j.find("waiting");
  if (w == j.end()) {
    return Error(400, ErrorCode::INVALID_PARAMS, "missing field \"waiting\"");
  }
  // A float, a string or a count no engine could queue is a caller's bug,
  // not a queue: refusing it keeps one bad scraper from steering deadlines.
  if (!w->is_number_integer() || w->get<int64_t>() < 0 ||
      w->get<int64_t>() > kMaxReportedWaiting) {
    return Error(400, ErrorCode::INVALID_PARAMS,
                 "field \"waiting\" must be an integer in [0, " +
                     std::to_string(kMaxReportedWaiting) + "]");
  }
  const auto& engines = router_->config().engines;
  for (const auto& e : engines) {
    if (e.id != id) continue;
    const uint64_t waiting = w->get<uint64_t>();
    router_->ReportQueue(id, waiting);
    json out = {{"engine_id", id}, {"waiting", waiting}};
    return {200, Dump(out)};
  }
  return Error(404, ErrorCode::INVALID_PARAMS, "unknown engine '" + id + "'");
}

RouterHttpServer::Reply RouterHttpServer::HandleStats() const {
  RouterStats s = router_->stats();
  json engines = json::array();
  const auto& cfg = router_->config().engines;
  for (size_t i = 0; i < cfg.size(); ++i) {
    engines.push_back(
        {{"id", cfg[i].id},
         {"endpoint", cfg[i].endpoint},
         {"local_node_ids", cfg[i].local_node_ids},
         {"in_flight", i < s.in_flight.size() ? s.in_flight[i] : 0},
         {"reported_waiting",
          i < s.reported_waiting.size() && s.reported_waiting[i] >= 0
              ? json(s.reported_waiting[i])
              : json(nullptr)}});
  }
  json j = {{"requests", s.requests},
            {"blocks_looked_up", s.blocks_looked_up},
            {"ssd_only_blocks", s.ssd_only_blocks},
            {"triggered", s.triggered},
            {"queued", s.queued},
            {"in_memory", s.in_memory},
            {"throttled_watermark", s.throttled_watermark},
            {"throttled_cap", s.throttled_cap},
            {"no_local_disk", s.no_local_disk},
            {"not_found", s.not_found},
            {"affinity_hits", s.affinity_hits},
            {"lookup_errors", s.lookup_errors},
            {"prefetch_errors", s.prefetch_errors},
            {"deadlines_sent", s.deadlines_sent},
            {"lookup_rpcs", s.lookup_rpcs},
            {"enable_prefetch", router_->config().enable_prefetch},
            {"master_server_address", router_->config().master_server_address},
            {"engines", std::move(engines)}};
  if (s.kv_events) {
    // docs/kv_events.md, "kvpool-router follows the stream".
    j["kv_events"] = {{"routes_from_map", s.routes_from_map},
                      {"blocks_from_map", s.blocks_from_map},
                      {"batches", s.event_batches},
                      {"gaps", s.event_gaps},
                      {"replays", s.event_replays},
                      {"resyncs", s.event_resyncs},
                      {"restarts", s.event_restarts},
                      {"next_seq", s.event_next_seq},
                      {"map_keys", s.map_keys},
                      {"map_evictions", s.map_evictions}};
  }
  if (server_) {
    const HttpServerStats h = server_->stats();
    j["http"] = {
        {"connections", h.accepted}, {"rejected_busy", h.rejected_busy},
        {"refused", h.refused},      {"timed_out", h.timed_out},
        {"requests", h.requests},    {"active", h.active},
        {"queued", h.queued}};
  }
  return {200, Dump(j)};
}

Status RouterHttpServer::Start(const std::string& host, int port) {
  Stop();
  server_ = std::make_unique<BoundedHttpServer>(limits_);
  auto send = [](httplib::Response& res, const Reply& r) {
    res.status = r.status;
    res.set_content(r.body, "application/json");
  };
  server_->Post("/route", [this, send](const httplib::Request& req,
                                       httplib::Response& res) {
    send(res, HandleRoute(req.body));
  });
  server_->Post("/complete", [this, send](const httplib::Request& req,
                                          httplib::Response& res) {
    send(res, HandleComplete(req.body));
  });
  server_->Post("/queue", [this, send](const httplib::Request& req,
                                       httplib::Response& res) {
    send(res, HandleQueue(req.body));
  });
  server_->Get("/stats",
               [this, send](const httplib::Request&, httplib::Response& res) {
                 send(res, HandleStats());
               });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  if (Status s = server_->Start(host, port); !s.ok()) {
    server_.reset();
    port_ = -1;
    return s;
  }
  port_ = server_->port();
  return Status::OK();
}

void RouterHttpServer::Stop() {
  if (server_) server_->Stop();
}

HttpServerStats RouterHttpServer::http_stats() const {
  return server_ ? server_->stats() : HttpServerStats();
}

}  // namespace kvpool
