// fuzz_router_http: the router's HTTP/JSON API (src/router/router_http.h),
// through RouterHttpServer's handlers without the HTTP server. A route
// looks the blocks up on the master and triggers their prefetch over gRPC,
// so the process runs a real MasterServer on 127.0.0.1 (a free port, once
// per process) with a fixed cluster in it: two nodes, a few keys in DRAM,
// one also on SSD, SSD-only keys on each node, a put in progress, and a
// second tenant. The master runs on a FakeClock that never advances, so
// nothing expires, no node dies and the tiers of the keys never change
// (prefetch triggers queue promotions that no holder takes).
//
// Input: byte 0 % 4 selects the handler (0: POST /route, 1: POST
// /complete, 2: GET /stats, 3: POST /queue), the rest is the request body.
//
// Invariants checked (docs/fuzzing.md):
//  1. Every reply is 200, 400 or 404 (404 only from /complete and /queue)
//     with a
//     JSON object body; never a 5xx: the master is up, so no upstream
//     error is genuine.
//  2. The status is the one a reference check of the body, written here
//     from the header's documentation, predicts: malformed JSON, a body
//     that is not an object, a missing or mistyped field, an empty key
//     list, an empty or over-long key, a tenant name over the master's
//     limit (256 bytes) give 400 with {"error": message, "code":
//     "INVALID_PARAMS"}; an unknown engine gives 404; anything else 200.
//  3. A 200 route carries every documented field with its type, echoes
//     request_id, and agrees with a model of the cluster: matched_prefix is
//     the number of leading keys the tenant holds readable, prefix_tiers
//     has their tier ("memory" before "local_disk"), holder and size,
//     ssd_only_blocks counts the SSD-only ones, prefetch lists exactly
//     those keys in order, each QUEUED; no prefetch error, prefetch not
//     disabled; the engine is the one the dispatch rule (most blocks on a
//     local node, then least loaded, then config order) picks from the
//     model's in-flight counts, with its endpoint.
//  4. /complete of a known engine answers its in-flight count, one less
//     than before (never below 0); /queue of a known engine with an
//     integer "waiting" in [0, 1000000] answers it and nothing else does;
//     /stats agrees with the counts and the last accepted reports too.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "kvpool/router.h"
#include "master/master_server.h"
#include "router/router_http.h"

namespace {

using namespace kvpool;
using json = nlohmann::json;

std::string g_body;  // the request, for the failure message

[[noreturn]] void Fail(const std::string& what,
                       const RouterHttpServer::Reply* r = nullptr) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n  request: %.300s\n",
               what.c_str(), g_body.c_str());
  if (r)
    std::fprintf(stderr, "  reply %d: %.600s\n", r->status, r->body.c_str());
  std::abort();
}

// Where each readable block is: what a route must report.
struct Block {
  std::string tier;  // "memory", "local_disk" or "processing"
  std::string node;
  uint64_t size;
};
// (tenant, key) -> block; the tenant as the master names it.
std::map<std::pair<std::string, std::string>, Block> g_model;

const std::vector<EngineInfo> kEngines = {
    {"e0", {"node-a"}, "http://e0:8000", 2},
    {"e1", {"node-b"}, "http://e1:8000", 0},
    {"e2", {}, "http://e2:8000", 0},
};
std::vector<uint64_t> g_in_flight(kEngines.size(), 0);
std::vector<int64_t> g_reported(kEngines.size(), -1);  // -1: never
std::set<std::string> g_tenants;  // the router's clients, one per tenant
uint64_t g_routed = 0;            // routes that reached Router::Route
uint64_t g_lookup_errors = 0;     // of those, refused by the master

// Never destroyed: libFuzzer and the seed driver exit without tearing
// down, and a gRPC server or channel torn down at exit would race its own
// threads.
FakeClock* g_clock;
MasterServer* g_master;
Router* g_router;
RouterHttpServer* g_http;

void SetUp() {
  spdlog::set_level(spdlog::level::off);
  g_clock = new FakeClock();
  MasterConfig c;
  c.rpc_address = "127.0.0.1";
  c.rpc_port = 0;
  c.metrics_port = -1;
  c.rpc_thread_num = 2;
  c.enable_offload = true;
  c.enable_prefetch_trigger = true;
  g_master = new MasterServer(c, g_clock);
  if (!g_master->Start().ok()) Fail("cannot start the master");
  MasterService& s = g_master->service();
  auto mount = [&](const std::string& node, SegmentKind kind, uint64_t size) {
    SegmentInfo i;
    i.node_id = node;
    i.kind = kind;
    i.capacity = size;
    i.data_endpoint = node + ":7000";
    if (!s.MountSegment(i, /*ssd_enabled=*/true).ok()) Fail("setup: mount");
  };
  mount("node-a", SegmentKind::kMain, 1 << 20);
  mount("node-b", SegmentKind::kMain, 1 << 20);
  mount("node-b", SegmentKind::kPrefetchBuffer, 256 << 10);
  auto put = [&](const std::string& t, const std::string& k, uint64_t size,
                 const std::string& node, bool end) {
    PutOptions o;
    o.preferred_node = node;
    if (!s.PutStart(t, k, size, o).ok() || (end && !s.PutEnd(t, k).ok()))
      Fail("setup: put " + k);
    g_model[{t.empty() ? "default" : t, k}] =
        Block{end ? "memory" : "processing", node, size};
  };
  put("", "m0", 1000, "node-a", true);
  put("", "m1", 2000, "node-b", true);
  put("", "m2", 3000, "node-a", true);
  put("", "m3", 100, "node-b", true);
  put("", "b0", 4096, "node-a", true);
  put("", "p0", 2048, "node-a", false);
  put("t1", "m0", 500, "node-b", true);
  // b0 gets an SSD copy on node-a too (its tier stays "memory").
  NodeTasks tasks;
  if (!s.Heartbeat("node-a", 0, 64, &tasks).ok()) Fail("setup: heartbeat");
  bool copied = false;
  for (const auto& t : tasks.offloads) {
    if (t.key != "b0") continue;
    copied = s.NotifyOffload("node-a", {{"", "b0", t.version, ErrorCode::OK}})
                 .at(0) == ErrorCode::OK;
  }
  if (!copied) Fail("setup: b0's SSD copy");
  auto disk = [&](const std::string& node, const std::string& t,
                  const std::string& k, uint64_t size) {
    if (s.RegisterDiskObjects(node, {{t, k, size, 0}}).at(0) != ErrorCode::OK)
      Fail("setup: disk object " + k);
    g_model[{t.empty() ? "default" : t, k}] = Block{"local_disk", node, size};
  };
  disk("node-a", "", "d0", 8192);
  disk("node-a", "", "d1", 300);
  disk("node-b", "", "d2", 4096);
  disk("node-b", "", "d3", 700);
  disk("node-a", "t1", "d0", 800);

  RouterConfig rc;
  rc.master_server_address = g_master->address();
  rc.engines = kEngines;
  rc.enable_prefetch = true;
  rc.prefetch_deadline = true;
  rc.rpc_timeout_ms = 30000;  // ASan and a busy machine: never a timeout
  // Pick() below models pure affinity; the weighed cost has its own tests
  // (DispatchPolicyTest).
  rc.affinity_weight = -1;
  auto r = Router::Create(rc);
  if (!r.ok()) Fail("cannot create the router: " + r.status().ToString());
  g_router = r.value().release();
  g_http = new RouterHttpServer(g_router);
}

// ---- reference checks

// A 4xx reply: a JSON object with an error message and a code name.
void CheckError(const RouterHttpServer::Reply& r, int want) {
  if (r.status != want)
    Fail("status " + std::to_string(r.status) + ", expected " +
             std::to_string(want),
         &r);
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_string() ||
      j["error"].get<std::string>().empty() || !j.contains("code") ||
      !j["code"].is_string())
    Fail("an error reply without its error and code", &r);
  const std::string code = j["code"].get<std::string>();
  if (code != "INVALID_PARAMS" && code != "INVALID_KEY")
    Fail("an error reply with code " + code, &r);
}

const json& Field(const json& j, const char* name, json::value_t type,
                  const RouterHttpServer::Reply& r) {
  auto it = j.find(name);
  const bool number = type == json::value_t::number_unsigned;
  if (it == j.end() ||
      (number ? !it->is_number_unsigned() && !it->is_number_integer()
              : it->type() != type))
    Fail(std::string("a 200 reply without a proper \"") + name + "\"", &r);
  return *it;
}

// What a body asks of /route: the reason it is refused (400), or empty.
struct RouteAsk {
  bool refused = false;
  std::string request_id, tenant = "default";
  std::vector<std::string> keys;
};

RouteAsk Classify(const std::string& body) {
  RouteAsk a;
  a.refused = true;
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return a;
  if (!j.contains("request_id") || !j["request_id"].is_string()) return a;
  a.request_id = j["request_id"].get<std::string>();
  if (j.contains("tenant")) {
    if (!j["tenant"].is_string()) return a;
    a.tenant = j["tenant"].get<std::string>();
  }
  if (!j.contains("block_keys") || !j["block_keys"].is_array()) return a;
  for (const auto& k : j["block_keys"]) {
    if (!k.is_string()) return a;
    a.keys.push_back(k.get<std::string>());
  }
  // Router::Route counts the request, then checks the keys.
  ++g_routed;
  if (a.keys.empty() || a.keys.size() > 65536) return a;
  for (const auto& k : a.keys)
    if (k.empty() || k.size() > 4096) return a;
  if (a.tenant.empty()) a.tenant = "default";
  // One client per tenant, at most 4096; then the master's name limit.
  if (!g_tenants.count(a.tenant)) {
    if (g_tenants.size() >= 4096) return a;
    g_tenants.insert(a.tenant);
  }
  if (a.tenant.size() > 256) {
    ++g_lookup_errors;
    return a;
  }
  a.refused = false;
  return a;
}

// The dispatch rule of the router's header, from the model's counts.
std::pair<int, bool> Pick(const std::vector<std::string>& holders) {
  std::map<std::string, uint64_t> on;
  for (const auto& h : holders)
    if (!h.empty()) ++on[h];
  uint64_t best = 0;
  for (const auto& e : kEngines)
    for (const auto& n : e.local_node_ids)
      if (on.count(n)) best = std::max(best, on[n]);
  int pick = -1;
  for (size_t i = 0; i < kEngines.size(); ++i) {
    bool local = false;
    for (const auto& n : kEngines[i].local_node_ids)
      local = local || (best > 0 && on.count(n) && on[n] == best);
    if (best > 0 && !local) continue;
    if (pick < 0 || g_in_flight[i] < g_in_flight[size_t(pick)]) pick = int(i);
  }
  return {pick, best > 0};
}

void CheckRoute(const std::string& body) {
  const RouteAsk ask = Classify(body);
  const RouterHttpServer::Reply r = g_http->HandleRoute(body);
  if (ask.refused) return CheckError(r, 400);
  if (r.status != 200) Fail("a valid route was refused", &r);
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object()) Fail("a 200 route whose body is not a JSON object", &r);
  using V = json::value_t;
  if (Field(j, "request_id", V::string, r).get<std::string>() != ask.request_id)
    Fail("request_id not echoed", &r);
  const auto engine = Field(j, "engine_id", V::string, r).get<std::string>();
  const auto endpoint =
      Field(j, "engine_endpoint", V::string, r).get<std::string>();
  const bool affinity = Field(j, "affinity_hit", V::boolean, r).get<bool>();
  const auto matched =
      Field(j, "matched_prefix", V::number_unsigned, r).get<uint64_t>();
  const json& tiers = Field(j, "prefix_tiers", V::array, r);
  const auto ssd =
      Field(j, "ssd_only_blocks", V::number_unsigned, r).get<uint64_t>();
  const json& prefetch = Field(j, "prefetch", V::array, r);
  const bool disabled =
      Field(j, "prefetch_disabled", V::boolean, r).get<bool>();
  const json& deadline =
      Field(j, "prefetch_deadline_ms", V::number_unsigned, r);
  if (j.contains("prefetch_error")) Fail("a prefetch error", &r);
  if (disabled) Fail("prefetch disabled on a master that has it", &r);

  // The model's prefix.
  std::vector<const Block*> prefix;
  std::vector<std::string> ssd_keys, holders;
  for (const auto& k : ask.keys) {
    auto it = g_model.find({ask.tenant, k});
    if (it == g_model.end() || it->second.tier == "processing") break;
    prefix.push_back(&it->second);
    holders.push_back(it->second.node);
    if (it->second.tier == "local_disk") ssd_keys.push_back(k);
  }
  if (matched != prefix.size() || tiers.size() != prefix.size())
    Fail("matched_prefix " + std::to_string(matched) + ", the model has " +
             std::to_string(prefix.size()),
         &r);
  for (size_t i = 0; i < prefix.size(); ++i) {
    const json& t = tiers[i];
    if (!t.is_object() || !t.contains("tier") || !t.contains("node_id") ||
        !t.contains("size") || t["tier"] != prefix[i]->tier ||
        t["node_id"] != prefix[i]->node || t["size"] != prefix[i]->size)
      Fail("prefix_tiers[" + std::to_string(i) + "] differs from the model",
           &r);
  }
  if (ssd != ssd_keys.size()) Fail("ssd_only_blocks differs", &r);
  if (prefetch.size() != ssd_keys.size())
    Fail("prefetch does not list the SSD-only blocks", &r);
  for (size_t i = 0; i < ssd_keys.size(); ++i) {
    const json& p = prefetch[i];
    if (!p.is_object() || p.value("key", "") != ssd_keys[i] ||
        p.value("status", "") != "QUEUED")
      Fail("prefetch[" + std::to_string(i) + "] is not a QUEUED trigger", &r);
  }
  if (ssd_keys.empty() && deadline != 0)
    Fail("a deadline without a trigger", &r);
  if (deadline.is_number_integer() && deadline.get<int64_t>() < 0)
    Fail("a negative deadline", &r);

  const auto [want, want_affinity] = Pick(holders);
  if (want < 0 || engine != kEngines[size_t(want)].id ||
      affinity != want_affinity || endpoint != kEngines[size_t(want)].endpoint)
    Fail("engine " + engine + ", the dispatch rule picks " +
             (want < 0 ? std::string("none") : kEngines[size_t(want)].id),
         &r);
  ++g_in_flight[size_t(want)];
}

void CheckComplete(const std::string& body) {
  const RouterHttpServer::Reply r = g_http->HandleComplete(body);
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("engine_id") ||
      !j["engine_id"].is_string())
    return CheckError(r, 400);
  const std::string id = j["engine_id"].get<std::string>();
  size_t e = 0;
  while (e < kEngines.size() && kEngines[e].id != id) ++e;
  if (e == kEngines.size()) return CheckError(r, 404);
  if (r.status != 200) Fail("a completion of a known engine refused", &r);
  if (g_in_flight[e] > 0) --g_in_flight[e];
  const json out = json::parse(r.body, nullptr, false);
  if (!out.is_object() || out.value("engine_id", "") != id ||
      !out.contains("in_flight") || out["in_flight"] != g_in_flight[e])
    Fail("in_flight " +
             (out.is_object() && out.contains("in_flight")
                  ? out["in_flight"].dump()
                  : std::string("?")) +
             ", the model has " + std::to_string(g_in_flight[e]),
         &r);
}

void CheckQueue(const std::string& body) {
  const RouterHttpServer::Reply r = g_http->HandleQueue(body);
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("engine_id") ||
      !j["engine_id"].is_string() || !j.contains("waiting"))
    return CheckError(r, 400);
  const json& w = j["waiting"];
  // The reference: an integer, by JSON's reading, within [0, 1000000].
  bool valid = false;
  int64_t waiting = -1;
  if (w.is_number_unsigned()) {
    valid = w.get<uint64_t>() <= 1000000;
    if (valid) waiting = int64_t(w.get<uint64_t>());
  } else if (w.is_number_integer()) {
    waiting = w.get<int64_t>();
    valid = waiting >= 0 && waiting <= 1000000;
  }
  if (!valid) return CheckError(r, 400);
  const std::string id = j["engine_id"].get<std::string>();
  size_t e = 0;
  while (e < kEngines.size() && kEngines[e].id != id) ++e;
  if (e == kEngines.size()) return CheckError(r, 404);
  if (r.status != 200) Fail("a valid queue report refused", &r);
  g_reported[e] = waiting;
  const json out = json::parse(r.body, nullptr, false);
  if (!out.is_object() || out.value("engine_id", "") != id ||
      !out.contains("waiting") || out["waiting"] != waiting)
    Fail("a queue report answered another count", &r);
}

void CheckStats() {
  const RouterHttpServer::Reply r = g_http->HandleStats();
  if (r.status != 200) Fail("stats refused", &r);
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("requests") || j["requests"] != g_routed ||
      !j.contains("engines") || !j["engines"].is_array() ||
      j["engines"].size() != kEngines.size())
    Fail("stats disagree with the routes made", &r);
  for (size_t i = 0; i < kEngines.size(); ++i) {
    const json& e = j["engines"][i];
    if (!e.is_object() || e.value("id", "") != kEngines[i].id ||
        !e.contains("in_flight") || e["in_flight"] != g_in_flight[i])
      Fail("stats: in_flight of " + kEngines[i].id + " differs", &r);
    if (!e.contains("reported_waiting") ||
        (g_reported[i] < 0 ? !e["reported_waiting"].is_null()
                           : e["reported_waiting"] != g_reported[i]))
      Fail("stats: reported_waiting of " + kEngines[i].id + " differs", &r);
  }
  if (!j.contains("lookup_errors") || j["lookup_errors"] != g_lookup_errors ||
      j.value("prefetch_errors", 1) != 0)
    Fail("stats count other lookup or prefetch errors", &r);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  SetUp();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  g_body.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckRoute(g_body);
      break;
    case 1:
      CheckComplete(g_body);
      break;
    case 2:
      CheckStats();
      break;
    default:
      CheckQueue(g_body);
      break;
  }
  return 0;
}
