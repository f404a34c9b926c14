#include "master/object_store.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

namespace kvpool {
namespace {

// The shard's tables, reached through its lock: insert, find, count,
// iterate and erase, as the master's callers use them.
TEST(ObjectStoreTest, ShardTablesInsertFindIterateErase) {
  ObjectStore store;
  ObjectKey a{0, "a"};
  ObjectKey b{1, "a"};  // same key, another tenant
  ObjectStore::Shard& sa = store.ShardFor(a);
  {
    MutexLock lock(&sa.mu());
    // Filled in place: GCC 12 takes a fresh local ObjectMeta for a read of
    // uninitialized memory (absl::InlinedVector's, before ReplicaList).
    sa.objects()[a].size = 7;
    sa.objects()[a].version = 1;  // the same entry, not a second one
    // A borrowed key finds it without copying the string.
    auto found = sa.objects().find(ObjectKeyView{0, "a"});
    ASSERT_NE(found, sa.objects().end());
    EXPECT_EQ(found->second.size, 7u);
    EXPECT_EQ(found->second.version, 1u);
    EXPECT_EQ(sa.objects().count(a), 1u);
    EXPECT_EQ(sa.objects().find(ObjectKeyView{0, "zz"}), sa.objects().end());
    sa.objects().prefetch(ObjectKeyView{0, "a"});  // a hint; changes nothing
    EXPECT_EQ(sa.objects().size(), 1u);
  }
  ObjectStore::Shard& sb = store.ShardFor(b);
  {
    MutexLock lock(&sb.mu());
    sb.objects()[b].size = 9;
    EXPECT_EQ(sb.objects().count(ObjectKeyView{0, "a"}), &sb == &sa ? 1u : 0u);
  }
  EXPECT_EQ(store.Size(), 2u);

  // Iterating every shard, each under its lock, sees both.
  std::set<uint32_t> tenants;
  for (size_t i = 0; i < ObjectStore::kShards; ++i) {
    ObjectStore::Shard& s = store.shard(i);
    MutexLock lock(&s.mu());
    for (const auto& [k, m] : s.objects()) {
      EXPECT_EQ(k.key, "a");
      EXPECT_EQ(m.size, k.tenant == 0 ? 7u : 9u);
      tenants.insert(k.tenant);
    }
  }
  EXPECT_EQ(tenants, (std::set<uint32_t>{0, 1}));

  {
    MutexLock lock(&sa.mu());
    sa.objects().erase(sa.objects().find(a));
    EXPECT_EQ(sa.objects().count(a), 0u);
  }
  EXPECT_EQ(store.Size(), 1u);
}

TEST(ObjectStoreTest, SideTablesAreKeyedLikeObjects) {
  ObjectStore store;
  ObjectKey k{0, "k"};
  ObjectStore::Shard& s = store.ShardFor(k);
  {
    MutexLock lock(&s.mu());
    s.upserts()[k].size = 1;
    s.promotions()[k].task_id = 2;
    s.offloads()[k] = OffloadState{3, 4, 5};
    EXPECT_TRUE(s.pending_puts().emplace(k, ClientId{6, 7}).second);
    EXPECT_EQ(s.upserts().find(ObjectKeyView{0, "k"})->second.size, 1u);
    EXPECT_EQ(s.promotions().find(k)->second.task_id, 2u);
    EXPECT_EQ(s.offloads().find(k)->second.version, 4u);
    EXPECT_EQ(s.pending_puts().count(k), 1u);
    // Erase by iterator (returns the next one) and by key.
    auto next = s.offloads().erase(s.offloads().begin());
    EXPECT_EQ(next, s.offloads().end());
    EXPECT_EQ(s.promotions().erase(k), 1u);
    EXPECT_EQ(s.pending_puts().erase(k), 1u);
    s.upserts().clear();
    EXPECT_TRUE(s.upserts().empty());
    EXPECT_TRUE(s.promotions().empty());
    EXPECT_TRUE(s.offloads().empty());
    EXPECT_TRUE(s.pending_puts().empty());
  }
  // Outside the lock, which Size takes shard by shard. Only `objects` counts
  // towards the store's size.
  EXPECT_EQ(store.Size(), 0u);
}

// Name answers from this thread's cache after the first ask, and an id
// forgotten since reads as unknown, never as its old name.
TEST(TenantTableTest, NameForgetsAForgottenTenant) {
  TenantTable t;
  const int64_t a = t.Pin("alpha", 16), b = t.Pin("beta", 16);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  for (int round = 0; round < 2; ++round) {  // the second from the cache
    EXPECT_EQ(t.Name(uint32_t(a)), "alpha");
    EXPECT_EQ(t.Name(uint32_t(b)), "beta");
  }
  t.Unref(uint32_t(a));  // alpha's last reference: forgotten
  EXPECT_EQ(t.Name(uint32_t(a)), "");
  EXPECT_EQ(t.Name(uint32_t(b)), "beta");
  // Another table's tenant of the same id is its own.
  TenantTable other;
  ASSERT_EQ(other.Pin("gamma", 16), a);
  EXPECT_EQ(other.Name(uint32_t(a)), "gamma");
  EXPECT_EQ(t.Name(uint32_t(a)), "");
}

// The four times of an ObjectMeta in 48 bits each: exact within +-2^47 ms,
// saturating beyond, and each independent of its neighbours.
TEST(PackedMillis4Test, ExactInRangeSaturatingBeyond) {
  using P = PackedMillis4;
  const int64_t steady_now = 3'000'000'000;  // about 35 days of uptime
  const int64_t cases[][2] = {
      {0, 0},
      {1, 1},
      {-1, -1},
      {steady_now, steady_now},
      {steady_now + 60'000, steady_now + 60'000},
      {int64_t{1} << 32, int64_t{1} << 32},  // past any 32-bit wrap
      {P::kMax, P::kMax},
      {P::kMin, P::kMin},
      {P::kMax + 1, P::kMax},
      {P::kMin - 1, P::kMin},
      {INT64_MAX, P::kMax},
      {INT64_MIN, P::kMin},
  };
  for (int i = 0; i < 4; ++i) {
    for (const auto& c : cases) {
      P p;
      for (int j = 0; j < 4; ++j) p.Set(j, 1000 + j);
      p.Set(i, c[0]);
      EXPECT_EQ(p.Get(i), c[1]) << "slot " << i << " value " << c[0];
      for (int j = 0; j < 4; ++j) {
        if (j != i) {
          EXPECT_EQ(p.Get(j), 1000 + j) << i << " " << j;
        }
      }
    }
  }
  // Saturation keeps order, so a max() of stored times is the stored max,
  // and a deadline set from a huge TTL stays after any clock reading.
  P p;
  p.Set(0, steady_now + INT64_MAX / 2);
  EXPECT_GT(p.Get(0), steady_now);
}

TEST(ObjectMetaTest, TimesReadBackAsSet) {
  ObjectMeta m;
  EXPECT_EQ(m.lease_deadline_ms(), 0);
  EXPECT_EQ(m.last_access_ms(), 0);
  EXPECT_EQ(m.soft_pin_deadline_ms(), 0);
  EXPECT_EQ(m.reader_lease_deadline_ms(), 0);
  m.set_lease_deadline_ms(11);
  m.set_last_access_ms(-22);
  m.set_soft_pin_deadline_ms(int64_t{1} << 40);
  m.set_reader_lease_deadline_ms(44);
  EXPECT_EQ(m.lease_deadline_ms(), 11);
  EXPECT_EQ(m.last_access_ms(), -22);
  EXPECT_EQ(m.soft_pin_deadline_ms(), int64_t{1} << 40);
  EXPECT_EQ(m.reader_lease_deadline_ms(), 44);
  EXPECT_TRUE(m.LeaseLive(10));
  EXPECT_FALSE(m.LeaseLive(11));
  EXPECT_TRUE(m.SoftPinned((int64_t{1} << 40) - 1));
  EXPECT_FALSE(m.SoftPinned(int64_t{1} << 40));
  // The size word and the replicas are untouched by the times.
  m.size = kMaxObjectSize;
  m.replicas.push_back(
      Replica{1, 2, 3, ReplicaKind::kMemory, ReplicaStatus::kComplete});
  m.set_last_access_ms(PackedMillis4::kMax);
  EXPECT_EQ(m.size, kMaxObjectSize);
  EXPECT_EQ(m.replicas.size(), 1u);
  EXPECT_EQ(m.lease_deadline_ms(), 11);
}

}  // namespace
}  // namespace kvpool
