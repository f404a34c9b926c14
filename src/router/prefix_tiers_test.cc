#include "router/prefix_tiers.h"

#include <gtest/gtest.h>

#include <map>

namespace kvpool {
namespace {

using events::BlockOp;
using events::DecodedEvent;

// A master's lookup over a fixed table, counting calls and keys.
struct FakeMaster {
  std::map<std::string, std::string> tier;  // key -> "memory"/"local_disk"
  int calls = 0;
  std::vector<std::string> asked;
  TierLookup Lookup() {
    return [this](const std::vector<std::string>& keys) {
      ++calls;
      std::vector<Result<TierInfo>> out;
      for (const auto& k : keys) {
        asked.push_back(k);
        auto it = tier.find(k);
        if (it == tier.end()) {
          out.emplace_back(ErrorCode::OBJECT_NOT_FOUND);
          continue;
        }
        TierInfo t;
        t.size = 7;
        ReplicaInfo r;
        r.complete = true;
        r.node_id = "n1";
        r.kind = it->second == "memory" ? ReplicaInfo::Kind::kMemory
                                        : ReplicaInfo::Kind::kLocalDisk;
        t.replicas.push_back(r);
        out.emplace_back(t);
      }
      return out;
    };
  }
};

DecodedEvent Add(std::string key, events::Medium m) {
  DecodedEvent e;
  e.op = BlockOp::kAdd;
  e.medium = m;
  e.tenant = "t";
  e.key = std::move(key);
  e.size = 7;
  return e;
}

TEST(PrefixTiersTest, AllFreshMakesNoLookup) {
  events::TierMap map(100);
  map.ResetToStreamStart();
  map.Apply(
      std::vector{Add("a", events::kMediumDram), Add("b", events::kMediumSsd)});
  FakeMaster m;
  auto p = PrefixFromMap(&map, "t", {"a", "b", "x", "a"}, m.Lookup());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(m.calls, 0);
  EXPECT_FALSE(p->lookup_rpc);
  ASSERT_EQ(p->blocks.size(), 2u);  // x is known absent: the prefix ends
  EXPECT_EQ(p->blocks[0].tier, "memory");
  EXPECT_EQ(p->blocks[1].tier, "local_disk");
  EXPECT_EQ(p->ssd_keys, std::vector<std::string>{"b"});
  EXPECT_EQ(p->blocks_from_map, 2u);
}

TEST(PrefixTiersTest, StaleKeysAreLookedUpOnceAndLearned) {
  events::TierMap map(100);  // nothing known
  FakeMaster m;
  m.tier = {{"a", "memory"}, {"b", "local_disk"}};
  auto p = PrefixFromMap(&map, "t", {"a", "b", "c", "a"}, m.Lookup());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(m.calls, 1);
  EXPECT_EQ(m.asked, (std::vector<std::string>{"a", "b", "c", "a"}));
  // The same as the lookup-only router's.
  FakeMaster m2 = m;
  auto l = PrefixFromLookup({"a", "b", "c", "a"}, m2.Lookup());
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(p->blocks.size(), l->blocks.size());
  for (size_t i = 0; i < l->blocks.size(); ++i) {
    EXPECT_EQ(p->blocks[i].tier, l->blocks[i].tier);
    EXPECT_EQ(p->blocks[i].node_id, l->blocks[i].node_id);
  }
  EXPECT_EQ(p->ssd_keys, l->ssd_keys);
  // Learned, "c" as absent: again, no lookup, holders kept.
  m.asked.clear();
  auto again = PrefixFromMap(&map, "t", {"a", "b", "c"}, m.Lookup());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(m.calls, 1);
  ASSERT_EQ(again->blocks.size(), 2u);
  EXPECT_EQ(again->blocks[1].node_id, "n1");
  // Only the unknown keys before the first known-absent one are asked.
  auto mixed = PrefixFromMap(&map, "t", {"a", "d", "c", "e"}, m.Lookup());
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(m.calls, 2);
  EXPECT_EQ(m.asked, std::vector<std::string>{"d"});
  EXPECT_EQ(mixed->blocks.size(), 1u);  // d is not in the store
}

TEST(PrefixTiersTest, ALookupErrorFailsTheRequest) {
  events::TierMap map(100);
  TierLookup broken = [](const std::vector<std::string>& keys) {
    return std::vector<Result<TierInfo>>(keys.size(),
                                         Result<TierInfo>(ErrorCode::RPC_FAIL));
  };
  EXPECT_EQ(PrefixFromMap(&map, "t", {"a"}, broken).code(),
            ErrorCode::RPC_FAIL);
  EXPECT_EQ(PrefixFromLookup({"a"}, broken).code(), ErrorCode::RPC_FAIL);
}

}  // namespace
}  // namespace kvpool
