// kvpool::Router following the master's KV events (docs/kv_events.md,
// "kvpool-router follows the stream"): routes from the tier map make no
// lookup, gaps are filled from the replay socket or fall back to lookups,
// and the map after a scripted run equals the master's state.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "events/kv_event_subscriber.h"
#include "events/tier_map.h"
#include "kvpool/router.h"
#include "master/master_server.h"
#include "tests/ssd_fixture.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;
using std::chrono::seconds;

RouteRequest Req(std::vector<std::string> keys) {
  RouteRequest r;
  r.request_id = "req";
  r.block_keys = std::move(keys);
  return r;
}

std::vector<std::string> Tiers(const RouteDecision& d) {
  std::vector<std::string> out;
  for (const auto& b : d.prefix_tiers) out.push_back(b.tier);
  return out;
}

class RouterEventsTest : public kvpool::testing::SsdFixture {
 protected:
  void StartWithEvents() {
    opts_.kv_events_endpoint = "tcp://127.0.0.1:*";
    opts_.kv_events_replay_endpoint = "tcp://127.0.0.1:*";
    opts_.enable_prefetch_trigger = true;
    Start();
  }
  events::KvEventPublisher& pub() {
    return *cluster_->master().events_publisher();
  }
  // `prefetch` off: no route triggers a promotion, so two routes of the
  // same keys see the same tiers (a promotion landing between them would
  // change what the second sees).
  std::unique_ptr<Router> MakeRouter(bool events, bool replay = true,
                                     bool prefetch = true) {
    RouterConfig c;
    c.enable_prefetch = prefetch;
    c.master_server_address = cluster_->master_address();
    c.engines = {{"e0", {"node0"}, ""}, {"e1", {"node1"}, ""}};
    if (events) {
      c.kv_events_endpoint = pub().endpoint();
      if (replay) c.kv_events_replay_endpoint = pub().replay_endpoint();
    }
    auto r = Router::Create(c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r.value()) : nullptr;
  }
  // Until the router has applied every batch the master has published.
  static bool CaughtUp(Router& r, events::KvEventPublisher& p) {
    return WaitUntil(
        [&] { return r.stats().event_next_seq >= p.batches_published(); },
        seconds(10));
  }
  // A change published as a batch of its own (the publisher drains about
  // once a millisecond; its counter is the only signal it gives).
  void PublishedPut(Client& c, const std::string& key) {
    const uint64_t before = pub().batches_published();
    ASSERT_TRUE(c.Put(key, "v").ok());
    ASSERT_TRUE(WaitUntil([&] { return pub().batches_published() > before; },
                          seconds(10)));
  }
};

TEST_F(RouterEventsTest, FreshStateRoutesWithoutALookup) {
  StartWithEvents();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 2);
  ASSERT_TRUE(c->Put("hot-0", "h0").ok());
  auto router = MakeRouter(true);
  auto lookups = MakeRouter(false);
  // Events of a put arrive after its PutEnd returns: one more put, then
  // wait for every batch.
  PublishedPut(*c, "marker");
  ASSERT_TRUE(CaughtUp(*router, pub()));
  const std::vector<std::string> keys = {"hot-0", cold[0], cold[1], "absent",
                                         "hot-0"};
  const uint64_t lookups_before = router->stats().lookup_rpcs;
  auto d = router->Route(Req(keys));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  RouterStats st = router->stats();
  EXPECT_EQ(st.lookup_rpcs, lookups_before);  // no master round trip
  EXPECT_EQ(st.routes_from_map, 1u);
  EXPECT_EQ(st.blocks_from_map, 3u);
  EXPECT_EQ(st.blocks_looked_up, 0u);
  // The same prefix and the same trigger as the router that looks up.
  EXPECT_EQ(Tiers(d.value()),
            (std::vector<std::string>{"memory", "local_disk", "local_disk"}));
  EXPECT_EQ(d->triggered_keys, (std::vector<std::string>{cold[0], cold[1]}));
  EXPECT_EQ(d->prefetch_statuses, (std::vector<PrefetchToMemoryStatus>(
                                      2, PrefetchToMemoryStatus::kQueued)));
  // The lookup router now sees them promoted or queued; its tiers for the
  // warm key are the same.
  auto l = lookups->Route(Req({"hot-0", "absent"}));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->matched_prefix, 1u);
  EXPECT_EQ(lookups->stats().lookup_rpcs, 1u);
}

TEST_F(RouterEventsTest, AGapIsFilledFromReplayWithoutALookup) {
  StartWithEvents();
  auto c = NewClient();
  auto router = MakeRouter(true);
  PublishedPut(*c, "k0");
  ASSERT_TRUE(CaughtUp(*router, pub()));
  // k1's batch is numbered and kept for replay but never sent: k2's
  // reveals the gap.
  pub().SkipSendsForTest(1);
  PublishedPut(*c, "k1");
  PublishedPut(*c, "k2");
  ASSERT_TRUE(CaughtUp(*router, pub()));
  RouterStats st = router->stats();
  EXPECT_GE(st.event_gaps, 1u);
  EXPECT_GE(st.event_replays, 1u);
  EXPECT_EQ(st.event_resyncs, 0u);
  auto d = router->Route(Req({"k0", "k1", "k2", "k3"}));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->matched_prefix, 3u);
  EXPECT_EQ(router->stats().lookup_rpcs, 0u);
}

TEST_F(RouterEventsTest, AnUnfillableGapFallsBackToLookupsWithTheSameDecision) {
  StartWithEvents();
  auto c = NewClient();
  auto cold = MakeSsdOnly(*c, 2);
  // No gap can be filled; no trigger: the decision is compared with the
  // lookup router's below, and a promotion started by the first route
  // could land before the second.
  auto router = MakeRouter(true, /*replay=*/false, /*prefetch=*/false);
  // No replay to catch up with: the router follows from the first batch
  // its subscription receives, which takes effect some time after connect.
  bool joined = false;
  for (int i = 0; i < 100 && !joined; ++i) {
    PublishedPut(*c, "probe-" + std::to_string(i));
    joined = WaitUntil(
        [&] {
          return router->stats().event_next_seq >= pub().batches_published();
        },
        std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(joined);
  PublishedPut(*c, "k0");
  ASSERT_TRUE(CaughtUp(*router, pub()));
  const uint64_t resyncs = router->stats().event_resyncs;
  pub().SkipSendsForTest(1);
  PublishedPut(*c, "k1");
  PublishedPut(*c, "k2");
  ASSERT_TRUE(CaughtUp(*router, pub()));
  ASSERT_EQ(router->stats().event_resyncs, resyncs + 1);
  // Stale: every key the prefix needs is looked up, in one RPC, and the
  // decision is the lookup router's, holders and engine included.
  auto lookups = MakeRouter(false, true, /*prefetch=*/false);
  const std::vector<std::string> keys = {"k0",    cold[0], "k1",
                                         cold[1], "k2",    "absent"};
  const uint64_t rpcs = router->stats().lookup_rpcs;
  auto d = router->Route(Req(keys));
  auto l = lookups->Route(Req(keys));
  ASSERT_TRUE(d.ok() && l.ok());
  EXPECT_EQ(router->stats().lookup_rpcs, rpcs + 1);
  EXPECT_EQ(router->stats().blocks_looked_up, keys.size());
  EXPECT_EQ(Tiers(d.value()), Tiers(l.value()));
  EXPECT_EQ(d->matched_prefix, 5u);
  for (size_t i = 0; i < d->prefix_tiers.size(); ++i)
    EXPECT_EQ(d->prefix_tiers[i].node_id, l->prefix_tiers[i].node_id) << i;
  EXPECT_EQ(d->engine_id, l->engine_id);
  EXPECT_EQ(d->ssd_only_blocks, l->ssd_only_blocks);
  // What a lookup answered is fresh: asked again, no RPC -- unless an event
  // about one of the keys (its offload finishing, on a loaded machine)
  // overtook that lookup, whose answer is then not learned (TierMap::Learn)
  // and the next route asks once more. So: a route without an RPC comes
  // within a few, each with the same prefix.
  ASSERT_TRUE(CaughtUp(*router, pub()));
  bool served_from_map = false;
  for (int i = 0; i < 5 && !served_from_map; ++i) {
    const uint64_t before = router->stats().lookup_rpcs;
    auto again = router->Route(Req({"k0", "k1", "k2", "absent"}));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->matched_prefix, 3u);
    served_from_map = router->stats().lookup_rpcs == before;
    if (!served_from_map) {
      ASSERT_TRUE(CaughtUp(*router, pub()));
    }
  }
  EXPECT_TRUE(served_from_map);
}

TEST_F(RouterEventsTest, EventsRouteToTheHoldersEngineAsLookupsDo) {
  StartWithEvents();
  auto c = NewClient();
  // Every block on node1: the engine local to it is e1, never the first
  // engine a load-only choice takes among idle ones.
  ReplicateConfig on1;
  on1.preferred_segment = "node1";
  const std::vector<std::string> keys = {"n1-a", "n1-b", "n1-c"};
  for (const auto& k : keys) ASSERT_TRUE(c->Put(k, "v", on1).ok());
  auto router = MakeRouter(true);
  auto lookups = MakeRouter(false);
  PublishedPut(*c, "marker");
  ASSERT_TRUE(CaughtUp(*router, pub()));
  auto d = router->Route(Req(keys));
  auto l = lookups->Route(Req(keys));
  ASSERT_TRUE(d.ok() && l.ok());
  EXPECT_EQ(router->stats().lookup_rpcs, 0u);  // from the map alone
  EXPECT_EQ(router->stats().blocks_from_map, keys.size());
  ASSERT_EQ(d->prefix_tiers.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(d->prefix_tiers[i].node_id, "node1") << i;
    EXPECT_EQ(d->prefix_tiers[i].node_id, l->prefix_tiers[i].node_id) << i;
  }
  EXPECT_EQ(l->engine_id, "e1");
  EXPECT_EQ(d->engine_id, l->engine_id);
  EXPECT_TRUE(d->affinity_hit);
  EXPECT_EQ(router->stats().affinity_hits, 1u);
}

// A key's copies as "M@node" (memory) and "S@node" (SSD), sorted, after its
// best tier: 'M' memory, 'S' SSD only, '-' absent, '?' stale; then '>' and
// the node a get would read from.
std::string Copies(std::vector<std::string> copies) {
  std::sort(copies.begin(), copies.end());
  std::string out;
  for (const auto& c : copies) out += " " + c;
  return out;
}

std::string MapView(const events::TierMap& map, const std::string& tenant,
                    const std::string& key) {
  std::vector<events::KeyState> s;
  const std::string keys[] = {key};
  map.Query(tenant, keys, &s);
  if (!s[0].fresh) return "?";
  char best = '-';
  if (s[0].media & (events::kMediumDram | events::kMediumPrefetchBuffer)) {
    best = 'M';
  } else if (s[0].media & events::kMediumSsd) {
    best = 'S';
  }
  if (best == '-') return "-";
  std::vector<std::string> copies;
  for (const auto& h : map.HoldersOf(tenant, key))
    copies.push_back((h.medium == events::kMediumSsd ? "S@" : "M@") + h.node);
  return std::string(1, best) + ">" + s[0].node + Copies(copies);
}

std::string MasterView(Client& c, const std::string& key) {
  auto t = c.BatchGetReplicaDesc({key});
  if (!t[0].ok()) return "-";
  const std::string best = t[0]->BestTier();
  if (best != "memory" && best != "local_disk") return "-";
  std::string first;
  std::vector<std::string> copies;
  for (const auto& r : t[0]->replicas) {
    if (!r.complete) continue;
    const bool memory = r.kind == ReplicaInfo::Kind::kMemory;
    if (first.empty() && memory == (best == "memory")) first = r.node_id;
    copies.push_back((memory ? "M@" : "S@") + r.node_id);
  }
  return std::string(1, best == "memory" ? 'M' : 'S') + ">" + first +
         Copies(copies);
}

TEST_F(RouterEventsTest, TheMapAfterAScriptedRunEqualsTheMastersState) {
  StartWithEvents();
  events::TierMap map(1000);
  events::SubscriberOptions so;
  so.endpoint = pub().endpoint();
  so.replay_endpoint = pub().replay_endpoint();
  events::KvEventSubscriber sub(so, &map);
  ASSERT_TRUE(sub.Start().ok());
  auto c = NewClient();
  ClientConfig other_cfg;
  other_cfg.tenant = "other";
  auto other = cluster_->NewClient(other_cfg).value();
  std::vector<std::string> keys = {"a", "b", "c", "d"};
  auto agree = [&](const char* step) {
    bool ok = WaitUntil(
        [&] {
          for (const auto& k : keys) {
            if (MapView(map, "default", k) != MasterView(*c, k)) return false;
            if (MapView(map, "other", k) != MasterView(*other, k)) return false;
          }
          return true;
        },
        seconds(20));
    for (const auto& k : keys) {
      EXPECT_EQ(MapView(map, "default", k), MasterView(*c, k))
          << step << " " << k;
      EXPECT_EQ(MapView(map, "other", k), MasterView(*other, k))
          << step << " " << k;
    }
    return ok;
  };
  // put
  for (const auto& k : keys) {
    ASSERT_TRUE(c->Put(k, RandomBytes(kValue, 1)).ok());
    ASSERT_TRUE(other->Put(k, RandomBytes(kValue, 2)).ok());
  }
  EXPECT_TRUE(agree("put"));
  // offload, then evict: the default tenant's keys go SSD-only
  EXPECT_TRUE(AllHaveDiskCopies(*c, keys));
  EXPECT_TRUE(agree("offload"));
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(
        c->Put("filler-" + std::to_string(i), RandomBytes(kValue, 100 + i))
            .ok());
  }
  ASSERT_TRUE(
      WaitUntil([&] { return Tier(*c, "a") == "local_disk"; }, seconds(20)));
  for (int i = 0; i < 40; ++i)
    c->Remove("filler-" + std::to_string(i), true).IgnoreError();
  EXPECT_TRUE(agree("evict"));
  // A key held by both nodes, node1 first, and one on node1 alone.
  ReplicateConfig two;
  two.replica_num = 2;
  two.preferred_segments = {"node1", "node0"};
  ASSERT_TRUE(c->Put("e", RandomBytes(kValue, 3), two).ok());
  ReplicateConfig on1;
  on1.preferred_segment = "node1";
  ASSERT_TRUE(c->Put("f", RandomBytes(kValue, 4), on1).ok());
  keys.push_back("e");
  keys.push_back("f");
  EXPECT_TRUE(agree("put on node1, and on both"));
  // promote (the router's trigger)
  ASSERT_TRUE(c->BatchPrefetchToMemory({"a"}).ok());
  ASSERT_TRUE(AllReachMemory(*c, {"a"}));
  EXPECT_TRUE(agree("promote"));
  // remove
  ASSERT_TRUE(c->Remove("b", true).ok());
  EXPECT_TRUE(agree("remove"));
  // clear: every key of the other tenant
  ASSERT_TRUE(other->RemoveAll(true).ok());
  EXPECT_TRUE(agree("clear"));
  EXPECT_EQ(sub.stats().resyncs, 0u);
}

}  // namespace
}  // namespace kvpool
