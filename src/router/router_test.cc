#include "kvpool/router.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "router/dispatch.h"
#include "router/read_deadline.h"
#include "router/router_http.h"
#include "tests/raw_http_client.h"
#include "tests/ssd_fixture.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using json = nlohmann::json;
using S = PrefetchToMemoryStatus;
using Clock = std::chrono::steady_clock;
using kvpool::testing::HttpStatus;
using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::RawHttpClient;
using kvpool::testing::WaitUntil;

std::unique_ptr<Router> MakeRouter(const std::string& master,
                                   std::vector<EngineInfo> engines = {},
                                   bool prefetch = true,
                                   int rpc_timeout_ms = 5000,
                                   double affinity_weight = -1) {
  RouterConfig c;
  c.affinity_weight = affinity_weight;
  c.master_server_address = master;
  c.engines = std::move(engines);
  c.enable_prefetch = prefetch;
  c.rpc_timeout_ms = rpc_timeout_ms;
  auto r = Router::Create(c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r.value()) : nullptr;
}

RouteRequest Req(std::vector<std::string> keys, std::string id = "req") {
  RouteRequest r;
  r.request_id = std::move(id);
  r.block_keys = std::move(keys);
  return r;
}

std::vector<std::string> Tiers(const RouteDecision& d) {
  std::vector<std::string> out;
  for (const auto& b : d.prefix_tiers) out.push_back(b.tier);
  return out;
}

int ClosedPort() { return testing::FreeLoopbackPort(); }

EngineInfo Engine(std::string id, std::vector<std::string> nodes) {
  return EngineInfo{std::move(id), std::move(nodes), ""};
}

TEST(EngineSpecTest, ParsesIdNodesEndpointAndRejectsGarbage) {
  auto e = ParseEngineSpec("id=e0,nodes=node0;node1,endpoint=http://h:8000");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->id, "e0");
  EXPECT_EQ(e->local_node_ids, (std::vector<std::string>{"node0", "node1"}));
  EXPECT_EQ(e->endpoint, "http://h:8000");
  EXPECT_EQ(ParseEngineSpec("nodes=a").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEngineSpec("id=x,color=red").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEngineSpec("id").code(), ErrorCode::INVALID_PARAMS);
}

// --------------------------------------------------- config, input, master

TEST(ReadDeadlineTest, FloorWhenNothingWaitsThenQueueTimesInterval) {
  // Nothing queued ahead (or the engine's batch size unknown): the floor.
  EXPECT_EQ(EstimateReadDeadlineMs(3, 8, 50, 100, 2.0), 100);
  EXPECT_EQ(EstimateReadDeadlineMs(99, 0, 50, 100, 2.0), 100);
  // At capacity: admitted after the 2 queued ahead and one more completion.
  EXPECT_EQ(EstimateReadDeadlineMs(10, 8, 50, 100, 2.0), 100 + 2 * 3 * 50);
  EXPECT_EQ(EstimateReadDeadlineMs(8, 8, 50, 100, 1.0), 150);
  // A queue but no measured rate yet: no deadline rather than a guess.
  EXPECT_EQ(EstimateReadDeadlineMs(10, 8, 0, 100, 2.0), 0);
}

TEST(ReadDeadlineTest, FromTheReportedQueue) {
  // Nothing waiting: admitted at once, whatever is in flight.
  EXPECT_EQ(EstimateReadDeadlineFromQueueMs(0, 50, 100, 2.0), 100);
  // Three waiting: admitted after them and one more completion.
  EXPECT_EQ(EstimateReadDeadlineFromQueueMs(3, 50, 100, 2.0), 100 + 2 * 4 * 50);
  EXPECT_EQ(EstimateReadDeadlineFromQueueMs(1, 10.2, 0, 1.0), 21);  // ceil
  // Waiting, but no measured rate: no deadline rather than a guess.
  EXPECT_EQ(EstimateReadDeadlineFromQueueMs(3, 0, 100, 2.0), 0);
}

TEST(ReadDeadlineTest, FromTheLoadsAhead) {
  // Two loaders: with one request loading (or none) a loader is free and
  // the get comes at once: the floor.
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(0, 2, 110, 2, 1.0), 2);
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(1, 2, 110, 2, 1.0), 2);
  // Both loaders busy: one load must end first; each request beyond them
  // one more departure.
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(2, 2, 110, 2, 1.0), 2 + 110);
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(5, 2, 110, 2, 1.0), 2 + 4 * 110);
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(5, 2, 110, 2, 2.0), 2 + 8 * 110);
  // One loader: every waiting request is a load ahead of this one.
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(3, 1, 10.5, 0, 1.0), 32);  // ceil
  // A wait but no measured departures: no deadline rather than a guess.
  EXPECT_EQ(EstimateReadDeadlineFromLoadsMs(2, 2, 0, 2, 1.0), 0);
  // The completion formula for the same report counts 3 ahead, not 1.
  EXPECT_EQ(EstimateReadDeadlineFromQueueMs(2, 110, 2, 1.0), 2 + 3 * 110);
}

TEST(ReadDeadlineTest, DeparturesAreTimedOnlyWhileEveryLoaderIsBusy) {
  AdmissionInterval a;
  // Two loaders. One request loading: a loader idles, so the 1000 ms until
  // it leaves say nothing about how fast loads drain.
  a.OnReport(1000, 5, 1, 2);
  a.OnReport(2000, 8, 3, 2);  // 5 left; nothing measured: not busy before
  EXPECT_EQ(a.mean_ms(), 0);
  a.OnReport(2100, 8, 2, 2);  // busy stretch: 100 ms, 1 departure
  EXPECT_DOUBLE_EQ(a.mean_ms(), 100);
  a.OnReport(2150, 8, 1, 2);  // busy: 50 ms, 1 departure
  EXPECT_DOUBLE_EQ(a.mean_ms(), (0.9 * 10 + 0.1 * 50) / (0.9 * 0.1 + 0.1));
  const double busy = a.mean_ms();
  a.OnReport(4000, 8, 0, 2);  // began with a free loader: not counted
  EXPECT_DOUBLE_EQ(a.mean_ms(), busy);
  // The default threshold (1) would have counted the first stretch.
  AdmissionInterval any;
  any.OnReport(1000, 5, 1);
  any.OnReport(2000, 8, 3);
  EXPECT_DOUBLE_EQ(any.mean_ms(), 1000.0 / 1);
}

TEST(ReadDeadlineTest, IntervalCountsOnlyCompletionsWithAQueue) {
  ServiceInterval s;
  s.OnComplete(1000, true);  // the first completion only starts the clock
  EXPECT_EQ(s.mean_ms(), 0);
  s.OnComplete(1100, true);
  EXPECT_DOUBLE_EQ(s.mean_ms(), 100);
  s.OnComplete(5000, false);  // idle gap: not a service time
  EXPECT_DOUBLE_EQ(s.mean_ms(), 100);
  s.OnComplete(5200, true);
  EXPECT_DOUBLE_EQ(s.mean_ms(), 0.9 * 100 + 0.1 * 200);
}

TEST(ReadDeadlineTest, AdmissionIntervalIsTimeOverAdmissionsWithAQueue) {
  AdmissionInterval a;
  a.OnReport(1000, 10, 4);  // 6 admitted so far; starts the clock
  EXPECT_EQ(a.mean_ms(), 0);
  a.OnReport(1100, 10, 2);  // 100 ms, 2 admitted
  EXPECT_DOUBLE_EQ(a.mean_ms(), 50);
  // 100 ms without an admission: longer, not skipped.
  a.OnReport(1200, 12, 4);
  EXPECT_DOUBLE_EQ(a.mean_ms(), (0.9 * 10 + 0.1 * 100) / (0.9 * 0.2));
  // A burst: 4 admitted in 10 ms when KV memory freed.
  const double before = a.mean_ms();
  a.OnReport(1210, 12, 0);
  EXPECT_LT(a.mean_ms(), before);
  // Nothing waited through the next stretch: not an admission time.
  const double idle = a.mean_ms();
  a.OnReport(9000, 20, 0);
  EXPECT_DOUBLE_EQ(a.mean_ms(), idle);
}

TEST(ReadDeadlineTest, AdmissionCountNeverGoesBack) {
  AdmissionInterval a;
  a.OnReport(1000, 10, 2);  // 8 admitted
  // A request routed but not yet counted as waiting, then counted: the
  // report says fewer admitted than before; that is no admission.
  a.OnReport(1100, 10, 3);
  EXPECT_EQ(a.mean_ms(), 0);
  a.OnReport(1200, 11, 1);  // 10 admitted: 2 more than the most seen
  EXPECT_GT(a.mean_ms(), 0);
  EXPECT_DOUBLE_EQ(a.mean_ms(), (0.9 * 0.1 * 100 + 0.1 * 100) / (0.1 * 2));
}

TEST(EngineSpecTest, MaxRunningIsACount) {
  auto e = ParseEngineSpec("id=e0,max_running=256");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->max_running, 256);
  EXPECT_EQ(ParseEngineSpec("id=e0,max_running=-1").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEngineSpec("id=e0,max_running=12x").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEngineSpec("id=e0,max_running=").code(),
            ErrorCode::INVALID_PARAMS);
}

TEST(EngineSpecTest, MaxLoadingIsACount) {
  auto e = ParseEngineSpec("id=e0,max_loading=2,max_running=8");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->max_loading, 2);
  EXPECT_EQ(e->max_running, 8);
  EXPECT_EQ(ParseEngineSpec("id=e0").value().max_loading, 0);  // unknown
  EXPECT_EQ(ParseEngineSpec("id=e0,max_loading=-2").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEngineSpec("id=e0,max_loading=two").code(),
            ErrorCode::INVALID_PARAMS);
}

TEST(RouterTest, CreateRejectsInvalidConfigs) {
  RouterConfig c;
  c.master_server_address = "";
  EXPECT_EQ(Router::Create(c).code(), ErrorCode::INVALID_PARAMS);
  c.master_server_address = "127.0.0.1:1";
  c.engines = {Engine("e0", {}), Engine("e0", {})};
  EXPECT_EQ(Router::Create(c).code(), ErrorCode::INVALID_PARAMS);
  c.engines = {Engine("", {})};
  EXPECT_EQ(Router::Create(c).code(), ErrorCode::INVALID_PARAMS);
  c.engines = {Engine("e0", {}), Engine("e1", {})};
  EXPECT_TRUE(Router::Create(c).ok());
}

TEST(RouterTest, BadInputIsInvalidParamsBeforeAnyRpc) {
  // No master behind this address: a validation failure must not need one.
  auto router = MakeRouter("127.0.0.1:" + std::to_string(ClosedPort()));
  EXPECT_EQ(router->Route(Req({})).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(router->Route(Req({"a", ""})).code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(router->Route(Req({"a", std::string(4097, 'k')})).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(router->Route(Req(std::vector<std::string>(65537, "k"))).code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(router->stats().lookup_errors, 0u);
  EXPECT_EQ(router->stats().blocks_looked_up, 0u);
}

TEST(RouterTest, RefusedMasterIsRpcFailWithinTheTimeout) {
  auto router = MakeRouter("127.0.0.1:" + std::to_string(ClosedPort()),
                           {Engine("e0", {})}, true, 1000);
  auto start = Clock::now();
  auto r = router->Route(Req({"k0", "k1"}));
  auto elapsed = Clock::now() - start;
  EXPECT_EQ(r.code(), ErrorCode::RPC_FAIL);
  EXPECT_NE(r.status().message().find("lookup"), std::string::npos);
  // gRPC queues the call while it connects, so a refused master ends at the
  // 1 s deadline (DEADLINE_EXCEEDED, mapped to RPC_FAIL). The bound leaves a
  // second for building the channel under TSan (1.51 s seen in CI); a hang
  // would be the 5 s default timeout or forever.
  EXPECT_LT(elapsed, std::chrono::milliseconds(2500));
  EXPECT_EQ(router->stats().lookup_errors, 1u);
  EXPECT_EQ(router->stats().in_flight[0], 0u);  // nothing was dispatched
}

TEST(RouterTest, SilentMasterIsRpcFailAtTheDeadline) {
  // Listens but never answers: the TCP connect succeeds, the RPC would wait
  // forever without the deadline.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  auto router = MakeRouter("127.0.0.1:" + std::to_string(ntohs(a.sin_port)), {},
                           true, 300);
  auto start = Clock::now();
  auto r = router->Route(Req({"k0"}));
  auto elapsed = Clock::now() - start;
  close(fd);
  EXPECT_EQ(r.code(), ErrorCode::RPC_FAIL);
  EXPECT_LT(elapsed, std::chrono::milliseconds(1300));
}

// ------------------------------------------------- dispatch on a cluster

class RouterDispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions o;
    o.num_nodes = 2;
    o.segment_size = 16ull << 20;
    cluster_ = std::make_unique<LocalCluster>(o);
    ASSERT_TRUE(cluster_->Start().ok());
    client_ = cluster_->NewClient().value();
  }
  void PutOn(const std::string& key, const std::string& node) {
    ReplicateConfig rc;
    rc.preferred_segment = node;
    ASSERT_TRUE(client_->Put(key, "v-" + key, rc).ok());
  }
  std::vector<EngineInfo> Engines() {
    return {Engine("e0", {"node0"}), Engine("e1", {"node1"}), Engine("e2", {})};
  }
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
};

TEST_F(RouterDispatchTest, EngineLocalToTheHolderOfMostPrefixBlocks) {
  for (auto k : {"a0", "a1", "a2"}) PutOn(k, "node1");
  PutOn("b0", "node0");
  auto router = MakeRouter(cluster_->master_address(), Engines());
  auto d = router->Route(Req({"a0", "b0", "a1", "a2", "missing", "a0"}));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->matched_prefix, 4u);
  EXPECT_EQ(Tiers(d.value()), (std::vector<std::string>(4, "memory")));
  EXPECT_EQ(d->prefix_tiers[0].node_id, "node1");
  EXPECT_EQ(d->prefix_tiers[1].node_id, "node0");
  EXPECT_EQ(d->prefix_tiers[0].size, 4u);  // "v-a0"
  EXPECT_EQ(d->engine_id, "e1");
  EXPECT_TRUE(d->affinity_hit);
  EXPECT_EQ(d->ssd_only_blocks, 0u);
  EXPECT_TRUE(d->triggered_keys.empty());

  // Pure affinity (these tests' router) comes before load: e1 is busier
  // now and still chosen. The default weighs load against it
  // (DispatchPolicyTest).
  EXPECT_EQ(router->Route(Req({"a0"}))->engine_id, "e1");
  auto b = router->Route(Req({"b0", "a0"}));  // one block each: tie on count
  EXPECT_EQ(b->engine_id, "e0");              // ... then load decides
  EXPECT_TRUE(b->affinity_hit);
  auto st = router->stats();
  EXPECT_EQ(st.affinity_hits, 3u);
  EXPECT_EQ(st.in_flight, (std::vector<uint64_t>{1, 2, 0}));
}

TEST_F(RouterDispatchTest, LeastLoadedWithoutLocalityAndCompleteLowersLoad) {
  auto router = MakeRouter(cluster_->master_address(), Engines());
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    auto d = router->Route(Req({"nothing-" + std::to_string(i)}));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->matched_prefix, 0u);
    EXPECT_FALSE(d->affinity_hit);
    order.push_back(d->engine_id);
  }
  // Equal loads go by config order, so the engines take turns.
  EXPECT_EQ(order, (std::vector<std::string>{"e0", "e1", "e2", "e0"}));
  EXPECT_EQ(router->stats().in_flight, (std::vector<uint64_t>{2, 1, 1}));
  router->Complete("e1");
  router->Complete("e1");  // a duplicate completion must not wrap around
  router->Complete("no-such-engine");
  EXPECT_EQ(router->stats().in_flight, (std::vector<uint64_t>{2, 0, 1}));
  EXPECT_EQ(router->Route(Req({"nothing"}))->engine_id, "e1");
}

TEST_F(RouterDispatchTest, TenantsAreSeparateNamespaces) {
  PutOn("shared-name", "node0");
  auto router = MakeRouter(cluster_->master_address(), Engines());
  RouteRequest r = Req({"shared-name"});
  EXPECT_EQ(router->Route(r)->matched_prefix, 1u);
  r.tenant = "other-tenant";
  EXPECT_EQ(router->Route(r)->matched_prefix, 0u);
}

TEST_F(RouterDispatchTest, MasterStoppedIsRpcFailNotAHang) {
  PutOn("k", "node0");
  auto router = MakeRouter(cluster_->master_address(), Engines(), true, 1000);
  ASSERT_TRUE(router->Route(Req({"k"})).ok());
  cluster_->Stop();
  auto start = Clock::now();
  auto r = router->Route(Req({"k"}));
  EXPECT_EQ(r.code(), ErrorCode::RPC_FAIL);
  // The 1 s deadline plus TSan's slack, as in RefusedMasterIsRpcFail...
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(2500));
}

// --------------------------------------------------------- HTTP service

TEST_F(RouterDispatchTest, HttpRouteStatsCompleteAndErrors) {
  PutOn("k0", "node0");
  auto router = MakeRouter(cluster_->master_address(), Engines());
  RouterHttpServer server(router.get());
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Client http("127.0.0.1", server.port());

  auto res =
      http.Post("/route", R"({"request_id":"r1","block_keys":["k0","nope"]})",
                "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json d = json::parse(res->body);
  EXPECT_EQ(d["request_id"], "r1");
  EXPECT_EQ(d["engine_id"], "e0");
  EXPECT_EQ(d["matched_prefix"], 1);
  EXPECT_EQ(d["prefix_tiers"][0]["tier"], "memory");
  EXPECT_EQ(d["prefix_tiers"][0]["node_id"], "node0");
  EXPECT_EQ(d["ssd_only_blocks"], 0);
  EXPECT_EQ(d["prefetch_disabled"], false);
  EXPECT_TRUE(d["affinity_hit"].get<bool>());

  res = http.Get("/stats");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  json s = json::parse(res->body);
  EXPECT_EQ(s["requests"], 1);
  EXPECT_EQ(s["engines"][0]["in_flight"], 1);

  res = http.Post("/complete", R"({"engine_id":"e0"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["in_flight"], 0);
  res = http.Post("/complete", R"({"engine_id":"zz"})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  for (const char* bad :
       {R"({"request_id":"r2","block_keys":["k0")",  // truncated JSON
        R"({"request_id":"r2"})",                    // no block_keys
        R"({"request_id":"r2","block_keys":"k0"})",  // not an array
        R"({"request_id":"r2","block_keys":[1,2]})",
        R"({"block_keys":["k0"]})",                // no request_id
        R"({"request_id":"r2","block_keys":[]})",  // INVALID_PARAMS
        "[]"}) {
    res = http.Post("/route", bad, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << bad;
    json e = json::parse(res->body);
    EXPECT_FALSE(e["error"].get<std::string>().empty()) << bad;
  }
  res = http.Post("/route", "{not json", "application/json");
  EXPECT_NE(json::parse(res->body)["error"].get<std::string>().find("JSON"),
            std::string::npos);

  res = http.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);

  // The master goes away: 503, promptly.
  auto dead = MakeRouter("127.0.0.1:" + std::to_string(ClosedPort()), Engines(),
                         true, 1000);
  RouterHttpServer dead_server(dead.get());
  ASSERT_TRUE(dead_server.Start("127.0.0.1", 0).ok());
  httplib::Client http2("127.0.0.1", dead_server.port());
  res = http2.Post("/route", R"({"request_id":"r3","block_keys":["k0"]})",
                   "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_EQ(json::parse(res->body)["code"], "RPC_FAIL");
}

// ------------------------------------------------------ HTTP limits

// No master is needed: /healthz and the refusals never reach one.
class RouterHttpLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_ = MakeRouter("127.0.0.1:" + std::to_string(ClosedPort()));
    ASSERT_TRUE(router_);
    limits_ = RouterHttpServer::DefaultHttpLimits();
    limits_.read_timeout_ms = 300;
    limits_.keep_alive_timeout_ms = 300;
    limits_.worker_threads = 4;
    limits_.max_body_bytes = 1024;
    server_ = std::make_unique<RouterHttpServer>(router_.get(), limits_);
    ASSERT_TRUE(server_->Start("127.0.0.1", 0).ok());
  }

  RawHttpClient::Reply Exchange(const std::string& request) {
    RawHttpClient c(server_->port());
    EXPECT_TRUE(c.connected());
    c.Send(request);
    c.FinishSending();
    return c.ReadUntilClose(std::chrono::seconds(5));
  }

  int Healthz() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_connection_timeout(10);
    c.set_read_timeout(10);
    auto r = c.Get("/healthz");
    return r ? r->status : -1;
  }

  std::unique_ptr<Router> router_;
  HttpLimits limits_;
  std::unique_ptr<RouterHttpServer> server_;
};

TEST(RouterHttpLimitsDefaultsTest, KeepTheRoutersBodyCap) {
  const HttpLimits l = RouterHttpServer::DefaultHttpLimits();
  EXPECT_EQ(l.max_body_bytes, 64ull << 20);
  EXPECT_GE(l.worker_threads, 8u);
  EXPECT_EQ(l.read_timeout_ms, 5000);
  EXPECT_EQ(l.max_request_line_bytes, 8192u);
}

// (a) 64 clients that never finish a request line, 16 per worker: /healthz
// is answered within twice the read timeout.
TEST_F(RouterHttpLimitsTest, SlowClientsDoNotStarveHealthz) {
  std::vector<std::unique_ptr<RawHttpClient>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<RawHttpClient>(server_->port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("POST /rou"));
  }
  ASSERT_TRUE(WaitUntil([&] { return server_->http_stats().accepted >= 64; },
                        std::chrono::seconds(5)));
  const auto start = Clock::now();
  EXPECT_EQ(Healthz(), 200);
  EXPECT_LT(Clock::now() - start,
            std::chrono::milliseconds(2 * limits_.read_timeout_ms));
  for (auto& c : slow) {
    auto r = c->ReadUntilClose(std::chrono::seconds(5));
    EXPECT_TRUE(r.closed);
    EXPECT_EQ(HttpStatus(r.data), 408) << r.data;
  }
}

// (b), (c), bodies: refused before any handler, in the router's error shape,
// and the server goes on serving.
TEST_F(RouterHttpLimitsTest, OversizedRequestsAreRefused) {
  auto r = Exchange("GET /" + std::string(1 << 20, 'u') +
                    " HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_EQ(HttpStatus(r.data), 414) << r.data.substr(0, 200);
  const size_t body = r.data.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  json e = json::parse(r.data.substr(body + 4));
  EXPECT_EQ(e["code"], "INVALID_PARAMS");
  EXPECT_FALSE(e["error"].get<std::string>().empty());

  std::string headers;
  for (int i = 0; i < 20; ++i) {
    headers +=
        "X-Pad-" + std::to_string(i) + ": " + std::string(1000, 'p') + "\r\n";
  }
  r = Exchange("GET /healthz HTTP/1.1\r\nHost: t\r\n" + headers + "\r\n");
  EXPECT_EQ(HttpStatus(r.data), 431) << r.data;

  const std::string route =
      R"({"request_id":"r","block_keys":[")" + std::string(2000, 'k') + "\"]}";
  r = Exchange("POST /route HTTP/1.1\r\nHost: t\r\nContent-Length: " +
               std::to_string(route.size()) + "\r\n\r\n" + route);
  EXPECT_EQ(HttpStatus(r.data), 413) << r.data;
  r = Exchange(
      "POST /route HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
      "Content-Encoding: gzip\r\n\r\n{}");
  EXPECT_EQ(HttpStatus(r.data), 415) << r.data;
  // Within the cap the handler runs: {} lacks request_id.
  r = Exchange(
      "POST /route HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n"
      "Connection: close\r\n\r\n{}");
  EXPECT_EQ(HttpStatus(r.data), 400) << r.data;
  EXPECT_NE(r.data.find("request_id"), std::string::npos) << r.data;

  EXPECT_EQ(Healthz(), 200);
  httplib::Client http("127.0.0.1", server_->port());
  auto stats = http.Get("/stats");
  ASSERT_TRUE(stats);
  json s = json::parse(stats->body);
  EXPECT_EQ(s["http"]["refused"], 4);
}

// (d) An idle connection is closed at the read timeout: the client reads EOF.
TEST_F(RouterHttpLimitsTest, IdleConnectionIsClosed) {
  RawHttpClient c(server_->port());
  ASSERT_TRUE(c.connected());
  const auto start = Clock::now();
  auto r = c.ReadUntilClose(std::chrono::seconds(5));
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(r.data, "");
  EXPECT_LT(Clock::now() - start,
            std::chrono::milliseconds(4 * limits_.read_timeout_ms));
  EXPECT_EQ(server_->http_stats().timed_out, 1u);
}

// POST /queue carries an engine's waiting count to Router::ReportQueue; no
// master is needed, the report never reaches one.
TEST(RouterHttpQueueTest, ReportsReachTheRouterAndBadOnesAreRefused) {
  auto router = MakeRouter("127.0.0.1:" + std::to_string(ClosedPort()),
                           {Engine("e0", {"node0"}), Engine("e1", {})});
  ASSERT_TRUE(router);
  RouterHttpServer server(router.get());
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Client http("127.0.0.1", server.port());

  auto waiting = [&](int engine) {
    auto res = http.Get("/stats");
    EXPECT_TRUE(res && res->status == 200);
    return res ? json::parse(res->body)["engines"][engine]["reported_waiting"]
               : json();
  };
  EXPECT_TRUE(waiting(0).is_null());  // never reported
  EXPECT_EQ(router->stats().reported_waiting, (std::vector<int64_t>{-1, -1}));

  auto res = http.Post("/queue", R"({"engine_id":"e1","waiting":7})",
                       "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["waiting"], 7);
  EXPECT_EQ(router->stats().reported_waiting, (std::vector<int64_t>{-1, 7}));
  EXPECT_EQ(waiting(1), 7);
  EXPECT_TRUE(waiting(0).is_null());
  res = http.Post("/queue", R"({"engine_id":"e1","waiting":0})",
                  "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(waiting(1), 0);

  res = http.Post("/queue", R"({"engine_id":"e9","waiting":1})",
                  "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  for (const char* bad :
       {R"({"engine_id":"e0"})",  // no waiting
        R"({"waiting":3})",       // no engine
        R"({"engine_id":"e0","waiting":-1})",
        R"({"engine_id":"e0","waiting":2.5})",
        R"({"engine_id":"e0","waiting":"3"})",
        R"({"engine_id":"e0","waiting":1000001})",
        R"({"engine_id":"e0","waiting":18446744073709551615})",
        R"({"engine_id":"e0","waiting":3)", "[]"}) {
    res = http.Post("/queue", bad, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << bad;
    EXPECT_FALSE(json::parse(res->body)["error"].get<std::string>().empty())
        << bad;
  }
  // None of the refusals changed a report.
  EXPECT_EQ(router->stats().reported_waiting, (std::vector<int64_t>{-1, 0}));
}

// ------------------------------------------------------- SSD tier, trigger

class RouterSsdTest : public kvpool::testing::SsdFixture {};

TEST_F(RouterSsdTest, PrefixCoversMemoryAndDiskAndStopsAtMissingOrInFlight) {
  Start();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 2);
  ASSERT_TRUE(c->Put("hot-0", "h0").ok());
  ASSERT_TRUE(c->Put("hot-1", "h1").ok());
  // A put in flight: started, never ended.
  ASSERT_TRUE(cluster_->master()
                  .service()
                  .PutStart("default", "inflight", 64, {})
                  .ok());
  ASSERT_EQ(Tier(*c, "inflight"), "processing");

  auto router = MakeRouter(cluster_->master_address(), {}, false);
  auto d = router->Route(
      Req({"hot-0", cold[0], "hot-1", cold[1], "inflight", "hot-0"}));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->matched_prefix, 4u);
  EXPECT_EQ(Tiers(d.value()),
            (std::vector<std::string>{"memory", "local_disk", "memory",
                                      "local_disk"}));
  EXPECT_EQ(d->prefix_tiers[1].size, kValue);
  EXPECT_FALSE(d->prefix_tiers[1].node_id.empty());
  EXPECT_EQ(d->ssd_only_blocks, 2u);
  EXPECT_TRUE(d->triggered_keys.empty());  // the router's prefetch is off
  EXPECT_FALSE(d->prefetch_disabled);
  EXPECT_EQ(d->engine_id, "");  // no engines configured

  EXPECT_EQ(router->Route(Req({"hot-0", "missing", "hot-1"}))->matched_prefix,
            1u);
  auto in_flight_first = router->Route(Req({"inflight", "hot-0"}));
  EXPECT_EQ(in_flight_first->matched_prefix, 0u);
  EXPECT_TRUE(in_flight_first->prefix_tiers.empty());
  // The lookup is read-only: nothing moved.
  EXPECT_EQ(Tier(*c, cold[0]), "local_disk");
  EXPECT_EQ(router->stats().blocks_looked_up, 6u + 3u + 2u);
}

TEST_F(RouterSsdTest, TriggerOffOnTheMasterSetsPrefetchDisabled) {
  Start();  // enable_prefetch_trigger is off by default
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 2);
  auto router = MakeRouter(cluster_->master_address(), {Engine("e0", {})});
  auto d = router->Route(Req(cold));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->ssd_only_blocks, 2u);
  EXPECT_TRUE(d->prefetch_disabled);
  EXPECT_TRUE(d->prefetch_statuses.empty());
  EXPECT_EQ(d->engine_id, "e0");  // still dispatched
  EXPECT_EQ(cluster_->master().service().promotion_counters().admitted, 0u);
  EXPECT_EQ(Tier(*c, cold[0]), "local_disk");
  EXPECT_EQ(router->stats().triggered, 0u);
}

TEST_F(RouterSsdTest, SsdOnlyPrefixBlocksAreQueuedThenPromoted) {
  opts_.enable_prefetch_trigger = true;
  Start();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 2);
  ASSERT_TRUE(c->Put("hot", "h").ok());
  std::vector<std::string> prompt = {"hot", cold[0], cold[1], "missing",
                                     "cold-after-miss"};

  // The router's own switch off: nothing is sent to the master.
  auto quiet = MakeRouter(cluster_->master_address(), {}, false);
  ASSERT_TRUE(quiet->Route(Req(prompt)).ok());
  EXPECT_EQ(cluster_->master().service().promotion_counters().admitted, 0u);

  auto router = MakeRouter(cluster_->master_address(), {});
  RouterHttpServer http(router.get());  // handlers only, no socket
  auto reply = http.HandleRoute(
      json{{"request_id", "r"}, {"block_keys", prompt}}.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  json d = json::parse(reply.body);
  EXPECT_EQ(d["matched_prefix"], 3);
  EXPECT_EQ(d["ssd_only_blocks"], 2);
  ASSERT_EQ(d["prefetch"].size(), 2u);
  EXPECT_EQ(d["prefetch"][0]["key"], cold[0]);
  EXPECT_EQ(d["prefetch"][0]["status"], "QUEUED");
  EXPECT_EQ(d["prefetch"][1]["status"], "QUEUED");
  EXPECT_EQ(d["prefetch_disabled"], false);
  auto st = router->stats();
  EXPECT_EQ(st.triggered, 2u);
  EXPECT_EQ(st.queued, 2u);

  ASSERT_TRUE(WaitUntil(
      [&] {
        return Tier(*c, cold[0]) == "memory" && Tier(*c, cold[1]) == "memory";
      },
      std::chrono::seconds(20)));
  auto again = router->Route(Req(prompt));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ssd_only_blocks, 0u);  // nothing left to trigger
  EXPECT_TRUE(again->triggered_keys.empty());
  auto got = GetPatiently(*c, cold[1]);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), RandomBytes(kValue, 1));
  EXPECT_EQ(cluster_->master().service().promotion_counters().completed, 2u);
}

// One cluster for both halves: its SSD-only setup is most of the test's
// time, ~40 s under TSan.
TEST_F(RouterSsdTest, DeadlineFollowsTheEngineQueueAndIsOffByDefault) {
  opts_.enable_prefetch_trigger = true;
  Start();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 8);
  EngineInfo e0;
  e0.id = "e0";
  e0.max_running = 1;
  // Off by default: no deadline is sent.
  auto plain = MakeRouter(cluster_->master_address(), {e0});
  auto d = plain->Route(Req({cold[0]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 0);
  EXPECT_EQ(plain->stats().deadlines_sent, 0u);

  RouterConfig rc;
  rc.master_server_address = cluster_->master_address();
  rc.engines = {e0};
  rc.prefetch_deadline = true;
  // Far enough that a loaded sanitizer run cannot pass it before the holder
  // gets to the task: a task past its deadline is dropped, and the wait
  // below would fail.
  rc.prefetch_deadline_floor_ms = 60000;
  auto router = Router::Create(rc).value();
  d = router->Route(Req({cold[1]}));  // nothing ahead: the floor
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 60000);
  // e0 runs one request and has one: the next waits, and no completion has
  // been measured yet, so no deadline is guessed.
  d = router->Route(Req({cold[2]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 0);
  EXPECT_EQ(router->stats().deadlines_sent, 1u);

  // An engine whose admission is bound by its KV memory queues requests
  // long before max_running of them are in flight. Once it reports its
  // queue, the router's deadline counts that queue instead of guessing from
  // in-flight requests.
  e0.max_running = 256;  // vLLM's max_num_seqs; memory binds first
  rc.engines = {e0};
  auto reported = Router::Create(rc).value();
  // 1 in flight of 256: by the in-flight guess nothing waits.
  d = reported->Route(Req({cold[3]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 60000);
  // The engine says 3 wait: no completion has been measured, so no deadline
  // (the guess would still have sent the floor).
  reported->ReportQueue("e0", 3);
  reported->ReportQueue("no-such-engine", 7);  // ignored
  d = reported->Route(Req({cold[4]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 0);
  // The queue drained: the floor again.
  reported->ReportQueue("e0", 0);
  d = reported->Route(Req({cold[5]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 60000);
  EXPECT_EQ(reported->stats().deadlines_sent, 2u);
  EXPECT_EQ(reported->stats().reported_waiting, std::vector<int64_t>{0});

  // An engine that counts its loading requests as waiting, and says it
  // runs 2 loads at once: with 1 waiting a loader is free and the get comes
  // at once (the floor), where the completion formula would count one
  // ahead and, with no interval measured, send none.
  e0.max_loading = 2;
  rc.engines = {e0};
  auto loads = Router::Create(rc).value();
  loads->ReportQueue("e0", 1);
  d = loads->Route(Req({cold[6]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 60000);
  // Both loaders busy and no load has been seen to end: no deadline.
  loads->ReportQueue("e0", 2);
  d = loads->Route(Req({cold[7]}));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->prefetch_deadline_ms, 0);

  // Either way the promotions run.
  ASSERT_TRUE(AllReachMemory(*c, cold));
}

TEST_F(RouterSsdTest, TwoRoutersTriggeringTheSameKeysPromoteEachOnce) {
  opts_.enable_prefetch_trigger = true;
  Start();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 4);
  // What is tested is that concurrent triggers promote once, not the RPC
  // deadline: a sanitizer run on two loaded cores has seen a lookup take
  // more than the default 5 s.
  constexpr int kPatientMs = 60000;
  auto r1 = MakeRouter(cluster_->master_address(), {Engine("e0", {})}, true,
                       kPatientMs);
  auto r2 = MakeRouter(cluster_->master_address(), {Engine("e0", {})}, true,
                       kPatientMs);

  std::atomic<bool> go{false};
  std::atomic<int> bad_status{0}, failures{0};
  std::mutex first_failure_mu;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (Router* r : {r1.get(), r2.get(), r1.get(), r2.get()}) {
    threads.emplace_back([&, r] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 5; ++i) {
        auto d = r->Route(Req(cold));
        if (!d.ok()) {
          std::lock_guard<std::mutex> lock(first_failure_mu);
          if (failures++ == 0) first_failure = d.status().ToString();
          continue;
        }
        for (auto s : d->prefetch_statuses) {
          if (s != S::kQueued && s != S::kInMemory) ++bad_status;
        }
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << "first: " << first_failure;
  EXPECT_EQ(bad_status.load(), 0);

  ASSERT_TRUE(AllReachMemory(*c, cold));
  auto& master = cluster_->master().service();
  ASSERT_TRUE(
      WaitUntil([&] { return master.promotion_counters().in_flight == 0; },
                std::chrono::seconds(20)));
  auto pc = master.promotion_counters();
  EXPECT_EQ(pc.admitted, cold.size());  // one promotion per key, not per call
  EXPECT_EQ(pc.completed, cold.size());
  // Every QUEUED the routers saw is one the master counted, duplicates
  // included: the dedup happened on the server, not in the routers.
  uint64_t seen_queued = r1->stats().queued + r2->stats().queued;
  EXPECT_GE(seen_queued, cold.size());
  EXPECT_EQ(master.metrics().CounterValue(
                "kvpool_master_prefetch_trigger_total", "status=\"QUEUED\""),
            seen_queued);
}

}  // namespace
}  // namespace kvpool
