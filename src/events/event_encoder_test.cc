#include "events/event_encoder.h"

#include <gtest/gtest.h>

#include <msgpack.hpp>
#include <string>

namespace kvpool::events {
namespace {

// msgpack written out by hand (the spec's byte codes), not by the library
// under test, so the golden bytes check the encoding itself.
std::string B(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}
std::string FixStr(std::string_view s) {
  return B({0xa0 | static_cast<int>(s.size())}) + std::string(s);
}
std::string Bin8(std::string_view s) {
  return B({0xc4, static_cast<int>(s.size())}) + std::string(s);
}
std::string Uint(uint64_t v) {
  if (v < 128) return B({static_cast<int>(v)});
  std::string s = v < (uint64_t{1} << 32) ? B({0xce}) : B({0xcf});
  const int bytes = v < (uint64_t{1} << 32) ? 4 : 8;
  for (int i = bytes - 1; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xff));
  return s;
}

TierEvent Event(TierEventKind kind, uint8_t media) {
  TierEvent ev;
  ev.kind = kind;
  ev.media = media;
  ev.tenant = "t";
  ev.key = "k";
  ev.size = 5;
  ev.ts_us = 1000000;  // 1.0 s
  ev.node = "n1";
  return ev;
}

TEST(EventEncoderTest, BlockStoredGoldenBytes) {
  std::string out;
  const TierEvent ev = Event(TierEventKind::kStored, kMediumDram);
  EncodeBatch({&ev, 1}, 2.0, 0, &out);
  const std::string want =
      B({0x94, 0xcb, 0x40, 0, 0, 0, 0, 0, 0, 0}) +  // [2.0,
      B({0x91, 0x9f}) +                             //  [[ 15 fields:
      FixStr("BlockStored") +                       //   tag
      B({0x91}) + Uint(BlockHash("k")) +            //   block_hashes
      B({0xc0, 0x90, 0x00, 0xc0}) +  // parent nil, token_ids [], 0, lora nil
      FixStr("DRAM") +               //   medium
      FixStr("stored") + Bin8("t") + Bin8("k") + B({0x05}) +  // kind..size
      B({0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}) +               //   ts 1.0
      B({0xc0, 0xc2}) +  // trigger nil, ssd_copy false,
      FixStr("n1") +     // node ]],
      B({0xc0, 0x00});   // data_parallel_rank nil, dropped_before 0]
  EXPECT_EQ(out, want);
}

TEST(EventEncoderTest, BlockHashIsXxh3WithTopBitCleared) {
  EXPECT_LT(BlockHash("some key"), uint64_t{1} << 63);
  EXPECT_NE(BlockHash("a"), BlockHash("b"));
}

TEST(EventEncoderTest, RemovalIsOneBlockRemovedPerMedium) {
  TierEvent ev = Event(TierEventKind::kRemoved, kMediumDram | kMediumSsd);
  TierEvent cleared = Event(TierEventKind::kCleared, 0);
  cleared.key.clear();
  TierEvent promoted = Event(TierEventKind::kPromoted, kMediumPrefetchBuffer);
  promoted.trigger = Trigger::kRouter;
  const TierEvent events[] = {ev, cleared, promoted};
  std::string out;
  EXPECT_EQ(EncodeBatch(events, 3.5, 7, &out), 4u);  // two removals
  msgpack::object_handle oh = msgpack::unpack(out.data(), out.size());
  const msgpack::object& batch = oh.get();
  ASSERT_EQ(batch.type, msgpack::type::ARRAY);
  ASSERT_EQ(batch.via.array.size, 4u);
  EXPECT_EQ(batch.via.array.ptr[0].as<double>(), 3.5);
  EXPECT_TRUE(batch.via.array.ptr[2].is_nil());
  EXPECT_EQ(batch.via.array.ptr[3].as<uint64_t>(), 7u);
  const auto& evs = batch.via.array.ptr[1].via.array;
  ASSERT_EQ(evs.size, 4u);  // two media removed, cleared, promoted
  auto field = [&](size_t e, size_t f) { return evs.ptr[e].via.array.ptr[f]; };
  EXPECT_EQ(field(0, 0).as<std::string>(), "BlockRemoved");
  EXPECT_EQ(field(0, 2).as<std::string>(), "DRAM");
  EXPECT_EQ(field(1, 2).as<std::string>(), "SSD");
  EXPECT_EQ(field(1, 3).as<std::string>(), "removed");
  EXPECT_EQ(field(1, 1).via.array.ptr[0].as<uint64_t>(), BlockHash("k"));
  EXPECT_EQ(field(0, 10).as<std::string>(), "n1");  // the holder, last
  EXPECT_EQ(field(1, 10).as<std::string>(), "n1");
  EXPECT_EQ(evs.ptr[2].via.array.size, 8u);  // a clear names no node
  EXPECT_EQ(field(2, 0).as<std::string>(), "AllBlocksCleared");
  EXPECT_EQ(field(2, 1).as<std::string>(), "cleared");
  EXPECT_EQ(field(3, 0).as<std::string>(), "BlockStored");
  EXPECT_EQ(field(3, 6).as<std::string>(), "PREFETCH_BUFFER");
  EXPECT_EQ(field(3, 7).as<std::string>(), "promoted");
  EXPECT_EQ(field(3, 12).as<std::string>(), "router");
  EXPECT_EQ(field(3, 14).as<std::string>(), "n1");
}

TEST(EventEncoderTest, NodeIsBounded) {
  TierEvent ev = Event(TierEventKind::kStored, kMediumDram);
  ev.node.assign(kMaxNodeIdBytes + 100, 'n');
  std::string out;
  EncodeBatch({&ev, 1}, 1.0, 0, &out);
  msgpack::object_handle oh = msgpack::unpack(out.data(), out.size());
  const auto& e = oh.get().via.array.ptr[1].via.array.ptr[0].via.array;
  ASSERT_EQ(e.size, 15u);
  EXPECT_EQ(e.ptr[14].as<std::string>().size(), kMaxNodeIdBytes);
}

TEST(EventEncoderTest, EvictionSaysWhetherAnSsdCopyIsKept) {
  TierEvent ev = Event(TierEventKind::kEvicted, kMediumDram);
  ev.ssd_copy = true;
  std::string out;
  EncodeBatch({&ev, 1}, 1.0, 0, &out);
  msgpack::object_handle oh = msgpack::unpack(out.data(), out.size());
  const auto& e = oh.get().via.array.ptr[1].via.array.ptr[0].via.array;
  ASSERT_EQ(e.size, 11u);
  EXPECT_EQ(e.ptr[2].as<std::string>(), "DRAM");
  EXPECT_EQ(e.ptr[3].as<std::string>(), "evicted");
  EXPECT_TRUE(e.ptr[9].as<bool>());
  EXPECT_EQ(e.ptr[10].as<std::string>(), "n1");
}

}  // namespace
}  // namespace kvpool::events
