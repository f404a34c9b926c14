#include "events/tier_map.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>

#include "events/event_decoder.h"
#include "events/event_encoder.h"

namespace kvpool::events {
namespace {

DecodedEvent Ev(BlockOp op, Medium m, std::string key, std::string tenant = "t",
                std::string node = "") {
  DecodedEvent e;
  e.op = op;
  e.medium = m;
  e.key = std::move(key);
  e.tenant = std::move(tenant);
  e.node = std::move(node);
  e.size = 10;
  return e;
}

// An event of holder `node`, tenant "t".
DecodedEvent On(const std::string& node, BlockOp op, Medium m,
                std::string key = "k") {
  return Ev(op, m, std::move(key), "t", node);
}

KeyState Get(const TierMap& map, const std::string& key,
             const std::string& tenant = "t") {
  std::vector<KeyState> out;
  const std::string keys[] = {key};
  map.Query(tenant, keys, &out);
  return out[0];
}

TEST(EventDecoderTest, ReadsWhatTheEncoderWrites) {
  std::vector<TierEvent> in(3);
  in[0].kind = TierEventKind::kStored;
  in[0].media = kMediumPrefetchBuffer;
  in[0].tenant = "ten";
  in[0].key = std::string("k\0y", 3);
  in[0].size = 4096;
  in[1].kind = TierEventKind::kRemoved;  // two tiers: two wire events
  in[1].media = kMediumDram | kMediumSsd;
  in[1].tenant = "ten";
  in[1].key = "gone";
  in[2].kind = TierEventKind::kCleared;
  in[2].tenant = "other";
  in[0].trigger = Trigger::kRouter;
  in[0].node = "node-a";
  in[1].node = "node-b";
  std::string payload;
  ASSERT_EQ(EncodeBatch(in, 1.5, 7, &payload), 4u);
  auto b = DecodeBatch(payload);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->ts, 1.5);
  EXPECT_EQ(b->dropped_before, 7u);
  ASSERT_EQ(b->events.size(), 4u);
  EXPECT_EQ(b->events[0].op, BlockOp::kAdd);
  EXPECT_EQ(b->events[0].medium, kMediumPrefetchBuffer);
  EXPECT_EQ(b->events[0].key, std::string("k\0y", 3));
  EXPECT_EQ(b->events[0].size, 4096u);
  EXPECT_EQ(b->events[0].trigger, Trigger::kRouter);
  EXPECT_EQ(b->events[0].node, "node-a");
  EXPECT_EQ(b->events[1].op, BlockOp::kRemove);
  EXPECT_EQ(b->events[1].medium, kMediumDram);
  EXPECT_EQ(b->events[1].node, "node-b");
  EXPECT_EQ(b->events[2].medium, kMediumSsd);
  EXPECT_EQ(b->events[2].kind, TierEventKind::kRemoved);
  EXPECT_EQ(b->events[2].node, "node-b");  // each tier's event names it
  EXPECT_EQ(b->events[3].op, BlockOp::kClear);
  EXPECT_EQ(b->events[3].tenant, "other");
  EXPECT_EQ(b->events[3].node, "");
  EXPECT_EQ(b->epoch, 0u);
  // A stream's batch: its epoch, and a reset clears every tenant.
  TierEvent reset;
  reset.kind = TierEventKind::kReset;
  reset.tenant = "ignored";
  reset.key = "leader:1";
  reset.size = 77;
  payload.clear();
  EncodeBatch(std::span<const TierEvent>(&reset, 1), 2.0, 0, &payload, 77);
  b = DecodeBatch(payload);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->epoch, 77u);
  ASSERT_EQ(b->events.size(), 1u);
  EXPECT_EQ(b->events[0].op, BlockOp::kClear);
  EXPECT_EQ(b->events[0].kind, TierEventKind::kReset);
  EXPECT_EQ(b->events[0].tenant, "");
}

// A one-event batch [ts, [event], nil, 0] around the event `pack` writes.
template <typename F>
std::string OneEventBatch(F pack) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack_double(1.5);
  pk.pack_array(1);
  pack(pk);
  pk.pack_nil();
  pk.pack_uint64(0);
  return std::string(buf.data(), buf.size());
}

// A BlockRemoved of DRAM with kvpool's seven fields, then `node` unless
// it is nullptr (a master from before the field).
std::string RemovedFrom(const std::string* node) {
  return OneEventBatch([&](msgpack::packer<msgpack::sbuffer>& pk) {
    pk.pack_array(node != nullptr ? 11 : 10);
    pk.pack(std::string("BlockRemoved"));
    pk.pack_array(1);
    pk.pack_uint64(1);
    pk.pack(std::string("DRAM"));
    pk.pack(std::string("evicted"));
    pk.pack(std::string("t"));
    pk.pack(std::string("k"));
    pk.pack_uint64(5);
    pk.pack_double(1.0);
    pk.pack_nil();
    pk.pack_false();
    if (node != nullptr) pk.pack(*node);
  });
}

TEST(EventDecoderTest, TheHolderNodeIsOptionalAndBounded) {
  auto b = DecodeBatch(RemovedFrom(nullptr));  // an older master's
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->events.size(), 1u);
  EXPECT_EQ(b->events[0].key, "k");
  EXPECT_EQ(b->events[0].node, "");
  const std::string node = "node-7";
  b = DecodeBatch(RemovedFrom(&node));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->events[0].node, "node-7");
  const std::string longest(kMaxNodeIdBytes, 'n');
  ASSERT_TRUE(DecodeBatch(RemovedFrom(&longest)).ok());
  const std::string too_long(kMaxNodeIdBytes + 1, 'n');
  EXPECT_FALSE(DecodeBatch(RemovedFrom(&too_long)).ok());
}

TEST(EventDecoderTest, RefusesWhatIsNotABatch) {
  EXPECT_FALSE(DecodeBatch("not msgpack at all").ok());
  EXPECT_FALSE(DecodeBatch(std::string("\x92\x01\x02", 3)).ok());
  // A vLLM batch without kvpool's fields: no key to apply it to.
  static constexpr char kVllmOnly[] =
      "\x94\xcb\0\0\0\0\0\0\0\0\x91\x93\xac"
      "BlockRemoved\x91\x01\xa4"
      "DRAM\xc0\x00";
  const std::string vllm_only(kVllmOnly, sizeof(kVllmOnly) - 1);
  EXPECT_FALSE(DecodeBatch(vllm_only).ok());
}

TEST(TierMapTest, FollowsTheTiersOfAKey) {
  TierMap map(100);
  map.ResetToStreamStart();
  EXPECT_TRUE(Get(map, "k").fresh);  // known absent
  EXPECT_EQ(Get(map, "k").media, 0);
  std::vector<DecodedEvent> evs = {
      Ev(BlockOp::kAdd, kMediumDram, "k"),      // put
      Ev(BlockOp::kAdd, kMediumSsd, "k"),       // offload
      Ev(BlockOp::kRemove, kMediumDram, "k")};  // evict
  map.Apply(evs);
  KeyState s = Get(map, "k");
  EXPECT_TRUE(s.fresh);
  EXPECT_EQ(s.media, kMediumSsd);
  EXPECT_EQ(s.size, 10u);
  map.Apply(std::vector{Ev(BlockOp::kAdd, kMediumPrefetchBuffer, "k")});
  EXPECT_EQ(Get(map, "k").media, kMediumSsd | kMediumPrefetchBuffer);
  map.Apply(std::vector{Ev(BlockOp::kRemove, kMediumSsd, "k"),
                        Ev(BlockOp::kRemove, kMediumPrefetchBuffer, "k")});
  EXPECT_TRUE(Get(map, "k").fresh);
  EXPECT_EQ(Get(map, "k").media, 0);
  EXPECT_EQ(map.stats().entries, 0u);  // absence needs no entry
}

TEST(TierMapTest, KeepsTheHoldersOfEachTier) {
  TierMap map(100);
  map.ResetToStreamStart();
  using H = std::vector<Holder>;
  map.Apply(std::vector{On("n0", BlockOp::kAdd, kMediumDram),   // put
                        On("n0", BlockOp::kAdd, kMediumSsd)});  // offload
  EXPECT_EQ(Get(map, "k").node, "n0");
  // A copy promoted on n1: first, as the master lists it.
  map.Apply(std::vector{On("n1", BlockOp::kAdd, kMediumPrefetchBuffer)});
  EXPECT_EQ(map.HoldersOf("t", "k"), (H{{kMediumPrefetchBuffer, "n1"},
                                        {kMediumDram, "n0"},
                                        {kMediumSsd, "n0"}}));
  EXPECT_EQ(Get(map, "k").node, "n1");
  // n0's DRAM copy goes: n1's memory copy is still there.
  map.Apply(std::vector{On("n0", BlockOp::kRemove, kMediumDram)});
  KeyState s = Get(map, "k");
  EXPECT_EQ(s.media, kMediumPrefetchBuffer | kMediumSsd);
  EXPECT_EQ(s.node, "n1");
  // A removal naming another node than the holder leaves the tier.
  map.Apply(std::vector{On("n2", BlockOp::kRemove, kMediumSsd)});
  EXPECT_EQ(Get(map, "k").media, kMediumPrefetchBuffer | kMediumSsd);
  // SSD only: the SSD copy's holder, the node a get would read from.
  map.Apply(std::vector{On("n1", BlockOp::kRemove, kMediumPrefetchBuffer)});
  s = Get(map, "k");
  EXPECT_EQ(s.media, kMediumSsd);
  EXPECT_EQ(s.node, "n0");
  EXPECT_EQ(map.HoldersOf("t", "k"), (H{{kMediumSsd, "n0"}}));
  // Two DRAM copies of a put on n1 and n0 (published n0 first): n1 first.
  map.Apply(std::vector{On("n0", BlockOp::kAdd, kMediumDram, "two"),
                        On("n1", BlockOp::kAdd, kMediumDram, "two")});
  EXPECT_EQ(Get(map, "two").node, "n1");
  // A removal that names no node (a master before the field): the tier.
  map.Apply(std::vector{On("", BlockOp::kRemove, kMediumDram, "two")});
  EXPECT_EQ(Get(map, "two").media, 0);
  EXPECT_TRUE(map.HoldersOf("t", "two").empty());
  // A lookup's holders, memory and SSD; a prefetch buffer removal on the
  // memory holder's node drops it (a lookup's memory may be either).
  map.Learn("t", "l", kMediumDram | kMediumSsd, 10,
            H{{kMediumDram, "n2"}, {kMediumDram, "n3"}, {kMediumSsd, "n2"}},
            map.version());
  EXPECT_EQ(Get(map, "l").node, "n2");
  map.Apply(
      std::vector{On("n2", BlockOp::kRemove, kMediumPrefetchBuffer, "l")});
  s = Get(map, "l");
  EXPECT_EQ(s.media, kMediumDram | kMediumSsd);  // n3's copy is left
  EXPECT_EQ(s.node, "n3");
  // Bounded, whatever the stream says.
  for (int i = 0; i < 20; ++i)
    map.Apply(std::vector{
        On("m" + std::to_string(i), BlockOp::kAdd, kMediumDram, "many")});
  EXPECT_EQ(map.HoldersOf("t", "many").size(), kMaxHoldersPerKey);
  EXPECT_EQ(Get(map, "many").node, "m19");
  // Gone from every tier: no entry, no holders.
  map.Apply(std::vector{On("n0", BlockOp::kRemove, kMediumSsd)});
  EXPECT_EQ(Get(map, "k").media, 0);
  EXPECT_TRUE(map.HoldersOf("t", "k").empty());
}

TEST(TierMapTest, ClearResetsOneTenantOrAll) {
  TierMap map(100);
  map.ResetToStreamStart();
  map.Apply(std::vector{Ev(BlockOp::kAdd, kMediumDram, "a", "t1"),
                        Ev(BlockOp::kAdd, kMediumDram, "a", "t2")});
  DecodedEvent clear;
  clear.op = BlockOp::kClear;
  clear.tenant = "t1";
  map.Apply(std::vector{clear});
  EXPECT_EQ(Get(map, "a", "t1").media, 0);
  EXPECT_TRUE(Get(map, "a", "t1").fresh);
  EXPECT_EQ(Get(map, "a", "t2").media, kMediumDram);
  // Stale everywhere; an all-tenants clear (a new master's reset) makes the
  // map exact again.
  map.MarkAllStale();
  EXPECT_FALSE(Get(map, "a", "t2").fresh);
  EXPECT_FALSE(Get(map, "b", "t3").fresh);
  clear.tenant = "";
  map.Apply(std::vector{clear});
  EXPECT_TRUE(Get(map, "a", "t2").fresh);
  EXPECT_EQ(Get(map, "a", "t2").media, 0);
  EXPECT_TRUE(Get(map, "b", "t3").fresh);
  EXPECT_EQ(map.stats().entries, 0u);
}

TEST(TierMapTest, AResetToTheStreamStartForgetsAnOldMastersKeys) {
  TierMap map(100);
  map.ResetToStreamStart();
  map.Apply(std::vector{Ev(BlockOp::kAdd, kMediumDram, "old")});
  map.MarkAllStale();  // a new master
  const uint64_t v = map.version();
  map.ResetToStreamStart();  // its stream from 0
  EXPECT_TRUE(Get(map, "old").fresh);
  EXPECT_EQ(Get(map, "old").media, 0);
  // A lookup sent before the reset may have asked the old master.
  map.Learn("t", "old", kMediumDram, 10, "", v);
  EXPECT_EQ(Get(map, "old").media, 0);
}

TEST(TierMapTest, StaleUntilLearnedAndEventsDoNotRefresh) {
  TierMap map(100);  // never complete: nothing known
  EXPECT_FALSE(Get(map, "k").fresh);
  map.Apply(std::vector{Ev(BlockOp::kAdd, kMediumSsd, "k")});
  // An SSD copy was added, but a DRAM copy from before may exist.
  EXPECT_FALSE(Get(map, "k").fresh);
  uint64_t v = map.version();
  map.Learn("t", "k", kMediumSsd | kMediumDram, 10, "node0", v);
  KeyState s = Get(map, "k");
  EXPECT_TRUE(s.fresh);
  EXPECT_EQ(s.media, kMediumSsd | kMediumDram);
  EXPECT_EQ(s.node, "node0");
  map.Apply(std::vector{Ev(BlockOp::kRemove, kMediumDram, "k")});
  EXPECT_TRUE(Get(map, "k").fresh);
  EXPECT_EQ(Get(map, "k").media, kMediumSsd);
  // A lookup overtaken by an event of the same key is not written.
  v = map.version();
  map.Apply(std::vector{Ev(BlockOp::kAdd, kMediumDram, "k")});
  map.Learn("t", "k", kMediumSsd, 10, "node0", v);
  EXPECT_EQ(Get(map, "k").media, kMediumSsd | kMediumDram);
  EXPECT_EQ(map.stats().learn_skipped, 1u);
  // A lookup's "memory" may have been a prefetch buffer copy: its
  // removal drops the memory copy whichever tier the event names.
  map.Learn("t", "pb", kMediumDram | kMediumSsd, 10, "", map.version());
  map.Apply(std::vector{Ev(BlockOp::kRemove, kMediumPrefetchBuffer, "pb")});
  EXPECT_EQ(Get(map, "pb").media, kMediumSsd);
  // Not found is fresh knowledge too.
  map.Learn("t", "absent", 0, 0, "", map.version());
  EXPECT_TRUE(Get(map, "absent").fresh);
  // A gap after the lookup started: the answer may be older than the gap.
  v = map.version();
  map.MarkAllStale();
  map.Learn("t", "k", kMediumSsd, 10, "", v);
  EXPECT_FALSE(Get(map, "k").fresh);
}

TEST(TierMapTest, CapacityEvictsLeastRecentlyUpdatedAndDistrustsAbsence) {
  TierMap map(2);
  map.ResetToStreamStart();
  map.Apply(std::vector{Ev(BlockOp::kAdd, kMediumDram, "a"),
                        Ev(BlockOp::kAdd, kMediumDram, "b"),
                        Ev(BlockOp::kAdd, kMediumSsd, "a"),  // a is newer
                        Ev(BlockOp::kAdd, kMediumDram, "c")});
  TierMapStats st = map.stats();
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.capacity_evictions, 1u);
  EXPECT_EQ(Get(map, "a").media, kMediumDram | kMediumSsd);
  EXPECT_TRUE(Get(map, "c").fresh);
  // b went for room: it is not known absent, it is unknown.
  EXPECT_FALSE(Get(map, "b").fresh);
  EXPECT_FALSE(Get(map, "never-seen").fresh);
  // Another tenant is unaffected.
  EXPECT_TRUE(Get(map, "x", "other").fresh);
}

}  // namespace
}  // namespace kvpool::events
