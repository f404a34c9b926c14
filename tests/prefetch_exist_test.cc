// Prefetch-on-exist end to end (shared/seeds/design-prefetch-on-exist.md):
// off by default and harmless when off, local and remote holders, dedup,
// the DRAM-pressure cooldown, the get-side kick, old masters and holders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/ssd_fixture.h"

namespace kvpool {
namespace {

using kvpool::testing::kValue;
using kvpool::testing::RandomBytes;
using kvpool::testing::WaitUntil;

// The two transports the parameterised suites run over, and their names.
const auto kTransports =
    ::testing::Values(TransportMode::kAuto, TransportMode::kTcp);
std::string TransportName(const ::testing::TestParamInfo<TransportMode>& info) {
  return info.param == TransportMode::kTcp ? "Tcp" : "SharedMemory";
}

class PrefetchExistTest : public kvpool::testing::SsdFixture {
 protected:
  void SetUp() override {
    SsdFixture::SetUp();
    opts_.default_kv_lease_ttl = 2000;
  }
  std::unique_ptr<Client> NewClient(bool prefetch,
                                    TransportMode mode = TransportMode::kAuto) {
    return SsdFixture::NewClient(mode, prefetch);
  }
  uint64_t MasterCounter(const std::string& name,
                         const std::string& labels = "") {
    return cluster_->master().service().metrics().CounterValue(name, labels);
  }
};

TEST_F(PrefetchExistTest, OffByDefaultChangesNothing) {
  Start();
  auto writer = NewClient(false);
  auto keys = MakeSsdOnly(*writer, 3);
  auto c = NewClient(false);
  uint64_t queries = MasterCounter("kvpool_master_query_keys_total");
  uint64_t exists =
      MasterCounter("kvpool_master_exists_total", "result=\"OK\"");
  ExistOptions opts;
  opts.prefetch_to_memory = true;  // asked for, but the switch is off
  auto r = c->BatchIsExist({keys[0], keys[1], "nope"}, opts);
  EXPECT_TRUE(r[0].value());
  EXPECT_TRUE(r[1].value());
  EXPECT_FALSE(r[2].value());
  EXPECT_TRUE(c->WaitPrefetchIdle(1000));
  // Same RPCs (the exist only), same results, no prefetch metrics.
  EXPECT_EQ(MasterCounter("kvpool_master_query_keys_total"), queries);
  EXPECT_EQ(MasterCounter("kvpool_master_exists_total", "result=\"OK\""),
            exists + 2);
  EXPECT_EQ(c->prefetch_stats().triggers, 0u);
  EXPECT_EQ(cluster_->master().service().promotion_counters().admitted, 0u);
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));
  EXPECT_EQ(cluster_->master().service().promotion_counters().admitted, 0u);
  EXPECT_EQ(Tier(*c, keys[1]), "local_disk");
}

TEST_F(PrefetchExistTest, LocalHolderPromotesAndGetReadsDram) {
  Start();
  auto c = NewClient(true);
  auto keys = MakeSsdOnly(*c, 3);
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  auto r = c->BatchIsExist(keys, opts);
  for (const auto& x : r) EXPECT_TRUE(x.value());
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const auto& k : keys) {
          if (Tier(*c, k) != "memory") return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
  uint64_t ssd_before = c->counters().ssd_bytes_read;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(c->Get(keys[i]).value(), RandomBytes(kValue, i));
  EXPECT_EQ(c->counters().ssd_bytes_read, ssd_before);  // served from DRAM
  auto st = c->prefetch_stats();
  EXPECT_EQ(st.completed, 3u);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(MasterCounter("kvpool_master_prefetch_fate_total",
                          "fate=\"read_from_dram\""),
            3u);
  // Probing again inside the window is deduplicated (no new work).
  c->BatchIsExist(keys, opts);
  EXPECT_EQ(c->prefetch_stats().dedup_hits, 3u);
}

TEST_F(PrefetchExistTest, RemoteHolderIsDelegatedOverTheDataPlane) {
  Start();
  auto c = NewClient(true, TransportMode::kTcp);
  auto keys = MakeSsdOnly(*c, 2);
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  c->BatchIsExist(keys, opts);
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  EXPECT_EQ(c->prefetch_stats().delegations, 2u);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Tier(*c, keys[0]) == "memory" && Tier(*c, keys[1]) == "memory";
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(c->Get(keys[1]).value(), RandomBytes(kValue, 1));
}

// The get reads the SSD at once (never waits) and kicks a prefetch, which
// is for the next get. The kick's job is held in the client's pool until
// the get has returned, so it reaches the holder after the get's read: the
// order in which a holder that drops promotions coming after their get
// (promotion_skip_after_get_ms, on by default) must still run it.
class GetKickTest : public PrefetchExistTest,
                    public ::testing::WithParamInterface<TransportMode> {};

TEST_P(GetKickTest, GetKickPromotesForTheNextGet) {
  Start();
  auto c = NewClient(true, GetParam());
  auto keys = MakeSsdOnly(*c, 1);
  kvpool::testing::DisarmFailpointsAtExit disarm;
  ASSERT_TRUE(ArmFailpoints("client.prefetch.before_job=pause:1500").ok());
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));
  EXPECT_EQ(c->prefetch_stats().triggers, 1u);
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  EXPECT_EQ(FailpointPasses("client.prefetch.before_job"), 1u);
  ASSERT_TRUE(WaitUntil([&] { return Tier(*c, keys[0]) == "memory"; },
                        std::chrono::seconds(20)));
  uint64_t skipped = 0;
  for (int n = 0; n < 2; ++n) {
    skipped += cluster_->node(n).ssd()->metrics().CounterValue(
        "kvpool_node_promotions_skipped_after_get_total");
  }
  EXPECT_EQ(skipped, 0u);
  // The next get reads DRAM.
  const uint64_t ssd_before = c->counters().ssd_bytes_read;
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));
  EXPECT_EQ(c->counters().ssd_bytes_read, ssd_before);
}

INSTANTIATE_TEST_SUITE_P(Transports, GetKickTest, kTransports, TransportName);

TEST_F(PrefetchExistTest, DramPressureOpensCooldownAndKickBypassesIt) {
  opts_.num_nodes = 1;
  Start();
  auto c = NewClient(true);
  auto keys = MakeSsdOnly(*c, 2);
  // Fill DRAM with leased keys so PromotionAllocStart finds no room.
  ReplicateConfig pin;
  pin.with_hard_pin = true;
  for (int i = 0; i < 16; ++i)
    c->Put("wall-" + std::to_string(i), RandomBytes(kValue, 500 + i), pin)
        .IgnoreError();  // as many as fit
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  c->BatchIsExist({keys[0]}, opts);
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  ASSERT_TRUE(WaitUntil([&] { return c->prefetch_stats().failed >= 1; },
                        std::chrono::seconds(10)));
  EXPECT_EQ(c->prefetch_stats().cooldown_entries, 1u);
  // While it lasts, exist-triggered prefetch is a no-op ...
  c->BatchIsExist({keys[1]}, opts);
  EXPECT_EQ(c->prefetch_stats().cooldown_skips, 1u);
  // ... but a get still kicks one (it bypasses only this client-side backoff).
  uint64_t before = c->prefetch_stats().keys_triggered;
  EXPECT_EQ(c->Get(keys[1]).value(), RandomBytes(kValue, 1));
  EXPECT_EQ(c->prefetch_stats().keys_triggered, before + 1);
  // The master's state was released at once each time (RAII guard).
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return cluster_->master().service().promotion_counters().in_flight == 0;
      },
      std::chrono::seconds(10)));
  auto pc = cluster_->master().service().promotion_counters();
  EXPECT_EQ(pc.admitted, pc.completed + pc.failed + pc.cancelled + pc.expired +
                             pc.in_flight);
}

TEST_F(PrefetchExistTest, OlderMasterMakesPrefetchAQuietNoOp) {
  opts_.emulate_pre_prefetch_master = true;
  Start();
  auto c = NewClient(true);
  auto keys = MakeSsdOnly(*c, 1);
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  EXPECT_TRUE(c->BatchIsExist(keys, opts)[0].value());
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  // Give the holder's registration a chance to run, then check nothing moved.
  auto& svc = cluster_->master().service();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return cluster_->node(0).ssd()->metrics().CounterValue(
                   "kvpool_node_prefetch_registrations_total",
                   "result=\"UNAVAILABLE_IN_CURRENT_STATUS\"") +
                   cluster_->node(1).ssd()->metrics().CounterValue(
                       "kvpool_node_prefetch_registrations_total",
                       "result=\"UNAVAILABLE_IN_CURRENT_STATUS\"") >=
               1;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(svc.promotion_counters().admitted, 0u);
  EXPECT_EQ(c->prefetch_stats().failed, 0u);
  EXPECT_EQ(Tier(*c, keys[0]), "local_disk");
  EXPECT_EQ(c->Get(keys[0]).value(),
            RandomBytes(kValue, 0));  // exist/get unaffected
}

TEST_F(PrefetchExistTest, OlderHolderMakesDelegationAQuietNoOp) {
  opts_.emulate_pre_prefetch_holder = true;
  Start();
  auto c = NewClient(true, TransportMode::kTcp);
  auto keys = MakeSsdOnly(*c, 1);
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  EXPECT_TRUE(c->BatchIsExist(keys, opts)[0].value());
  ASSERT_TRUE(c->WaitPrefetchIdle(10000));
  EXPECT_EQ(c->prefetch_stats().delegations, 0u);
  EXPECT_EQ(c->prefetch_stats().failed, 0u);
  EXPECT_EQ(Tier(*c, keys[0]), "local_disk");
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));
}

TEST_F(PrefetchExistTest, ShutdownDrainsBeforeTheClientGoes) {
  Start();
  auto c = NewClient(true);
  auto keys = MakeSsdOnly(*c, 3);
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  c->BatchIsExist(keys, opts);
  c.reset();  // must drain queued jobs and join the workers, not crash
  auto other = NewClient(false);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(other->Get(keys[i]).value(), RandomBytes(kValue, i));
}

// The exist arm's cost (issue #14): an engine's exist is followed at once by
// its get, which reads the block from the SSD (it never waits), while the
// promotion the exist triggered waits in the holder's queue and then read
// the same block from the SSD again. With ssd_read_share_bytes the get's
// bytes serve the waiting promotion: one disk read for both.
class SharedReadTest : public PrefetchExistTest,
                       public ::testing::WithParamInterface<TransportMode> {
 protected:
  uint64_t DiskValuesRead() {
    return cluster_->node(0).ssd()->storage()->GetStats().values_read;
  }
  // Exist-triggers a promotion of an SSD-only key, holds it in the holder's
  // queue, gets the key, then lets the promotion run. Returns the values the
  // holder read from its disk meanwhile.
  uint64_t GetWhilePromotionWaits(const std::string& key, Client& c) {
    SsdTier& tier = *cluster_->node(0).ssd();
    tier.PausePromotionsForTest(true);
    const uint64_t before = DiskValuesRead();
    ExistOptions opts;
    opts.prefetch_to_memory = true;
    EXPECT_TRUE(c.BatchIsExist({key}, opts)[0].value());
    EXPECT_TRUE(WaitUntil([&] { return tier.queued_promotions() == 1; },
                          std::chrono::seconds(20)));
    EXPECT_EQ(c.Get(key).value(), RandomBytes(kValue, 0));  // from the SSD
    tier.PausePromotionsForTest(false);
    EXPECT_TRUE(WaitUntil([&] { return Tier(c, key) == "memory"; },
                          std::chrono::seconds(20)));
    return DiskValuesRead() - before;
  }
};

TEST_P(SharedReadTest, GetAndItsWaitingPromotionReadTheDiskOnce) {
  KVPOOL_SKIP_UNDER_RFC_PROFILE();
  opts_.num_nodes = 1;
  opts_.ssd_read_share_bytes = 8 * kValue;
  Start();
  auto c = NewClient(true, GetParam());
  auto keys = MakeSsdOnly(*c, 1);
  EXPECT_EQ(GetWhilePromotionWaits(keys[0], *c), 1u);
  SsdTier& tier = *cluster_->node(0).ssd();
  EXPECT_EQ(
      tier.metrics().CounterValue("kvpool_node_promotion_shared_reads_total"),
      1u);
  // The promoted replica holds the value, and the next get reads it there.
  const uint64_t ssd_before = c->counters().ssd_bytes_read;
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));
  EXPECT_EQ(c->counters().ssd_bytes_read, ssd_before);
  // In process the client sees the promotion complete; over TCP it handed
  // the key to the holder.
  if (GetParam() == TransportMode::kTcp) {
    EXPECT_EQ(c->prefetch_stats().delegations, 1u);
  } else {
    EXPECT_EQ(c->prefetch_stats().completed, 1u);
  }
  EXPECT_EQ(tier.shared_read_stats().held_bytes, 0u);  // nothing kept now
  EXPECT_EQ(tier.shared_read_stats().offered, 1u);
}

// Shared reads are on by default (docs/prefetch_defaults.md).
TEST_P(SharedReadTest, OnByDefaultGetAndPromotionReadTheDiskOnce) {
  KVPOOL_SKIP_UNDER_RFC_PROFILE();
  opts_.num_nodes = 1;
  Start();
  auto c = NewClient(true, GetParam());
  auto keys = MakeSsdOnly(*c, 1);
  EXPECT_EQ(GetWhilePromotionWaits(keys[0], *c), 1u);
  EXPECT_EQ(cluster_->node(0).ssd()->metrics().CounterValue(
                "kvpool_node_promotion_shared_reads_total"),
            1u);
}

// prefetch_profile=rfc is the seeds' holder whatever the knobs say.
TEST_P(SharedReadTest, RfcProfileEveryPromotionReadsTheDisk) {
  opts_.num_nodes = 1;
  opts_.prefetch_profile = "rfc";
  opts_.ssd_read_share_bytes = 8 * kValue;
  Start();
  auto c = NewClient(true, GetParam());
  auto keys = MakeSsdOnly(*c, 1);
  EXPECT_EQ(GetWhilePromotionWaits(keys[0], *c), 2u);  // the RFC's chain
  EXPECT_EQ(cluster_->node(0).ssd()->metrics().CounterValue(
                "kvpool_node_promotion_shared_reads_total"),
            0u);
}

TEST_P(SharedReadTest, BytesOverTheBudgetAreNotKept) {
  KVPOOL_SKIP_UNDER_RFC_PROFILE();
  opts_.num_nodes = 1;
  opts_.ssd_read_share_bytes = kValue / 2;  // smaller than one value
  // The promotion then comes after its get: read it again rather than skip
  // it (the next test), to see the budget alone.
  opts_.promotion_skip_after_get_ms = 0;
  Start();
  auto c = NewClient(true, GetParam());
  auto keys = MakeSsdOnly(*c, 1);
  EXPECT_EQ(GetWhilePromotionWaits(keys[0], *c), 2u);
  EXPECT_EQ(cluster_->node(0).ssd()->shared_read_stats().refused, 1u);
  EXPECT_EQ(cluster_->node(0).ssd()->shared_read_stats().held_bytes, 0u);
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));
}

// By default a prefetch promotion that comes after its get, with no bytes
// kept for it (here: over the budget), is dropped unread and counted: the
// disk reads the block once, for the get (promotion_skip_after_get_ms).
TEST_P(SharedReadTest, ByDefaultAPromotionAfterItsGetIsNotRead) {
  KVPOOL_SKIP_UNDER_RFC_PROFILE();
  opts_.num_nodes = 1;
  opts_.ssd_read_share_bytes = kValue / 2;  // nothing can be kept
  Start();
  auto c = NewClient(true, GetParam());
  auto keys = MakeSsdOnly(*c, 1);
  SsdTier& tier = *cluster_->node(0).ssd();
  tier.PausePromotionsForTest(true);
  const uint64_t before = DiskValuesRead();
  ExistOptions opts;
  opts.prefetch_to_memory = true;
  EXPECT_TRUE(c->BatchIsExist({keys[0]}, opts)[0].value());
  ASSERT_TRUE(WaitUntil([&] { return tier.queued_promotions() == 1; },
                        std::chrono::seconds(20)));
  EXPECT_EQ(c->Get(keys[0]).value(), RandomBytes(kValue, 0));  // the SSD
  tier.PausePromotionsForTest(false);
  const char* kSkipped = "kvpool_node_promotions_skipped_after_get_total";
  ASSERT_TRUE(WaitUntil([&] { return tier.metrics().CounterValue(kSkipped); },
                        std::chrono::seconds(20)));
  EXPECT_EQ(tier.metrics().CounterValue(kSkipped), 1u);
  EXPECT_EQ(DiskValuesRead() - before, 1u);
  EXPECT_EQ(Tier(*c, keys[0]), "local_disk");
}

INSTANTIATE_TEST_SUITE_P(Transports, SharedReadTest, kTransports,
                         TransportName);

}  // namespace
}  // namespace kvpool
