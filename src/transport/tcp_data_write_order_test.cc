// Write generations (transport/write_order.h): a WRITE token carries the
// generation of its grant, and a node refuses a write whose generation is
// older than one that has written any byte of its range already, so the
// token of a value that is gone cannot overwrite the value that took its
// range since. A newer write waits for an older overlapping one that is
// still copying, so their bytes never mix.
#include <gtest/gtest.h>

#include <algorithm>
#include <asio.hpp>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/capability.h"
#include "common/crypto.h"
#include "tests/test_util.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"
#include "transport/wire_format.h"
#include "transport/write_order.h"

namespace kvpool {
namespace {

using asio::ip::tcp;
using kvpool::testing::WaitUntil;

// ---------------------------------------------------------------- the record

// An op that writes the whole of its grant.
WriteOrder::Op Op(uint64_t segment, uint64_t offset, uint64_t length,
                  uint64_t generation) {
  return WriteOrder::Op{segment, offset, length, offset, length, generation};
}
// An op that writes [offset, offset+length) of the grant [grant_offset,
// grant_offset+grant_length).
WriteOrder::Op OpIn(uint64_t grant_offset, uint64_t grant_length,
                    uint64_t offset, uint64_t length, uint64_t generation) {
  return WriteOrder::Op{1,         offset, length, grant_offset, grant_length,
                        generation};
}

// Admits one op; whether it was let through. The pass ends at once.
bool AdmitOne(WriteOrder& order, WriteOrder::Op op, uint64_t epoch = 1) {
  WriteOrder::Op ops[] = {op};
  WriteOrder::Pass pass = order.Admit(epoch, ops);
  return ops[0].admitted;
}

TEST(WriteOrderTest, AnOlderGenerationCannotWriteOverANewerOne) {
  WriteOrder order;
  EXPECT_TRUE(AdmitOne(order, Op(1, 1000, 100, 20)));
  // Any overlap with the newer range refuses the older write.
  EXPECT_FALSE(AdmitOne(order, Op(1, 1000, 100, 10)));
  EXPECT_FALSE(AdmitOne(order, Op(1, 950, 51, 10)));
  EXPECT_FALSE(AdmitOne(order, Op(1, 1099, 100, 10)));
  EXPECT_FALSE(AdmitOne(order, Op(1, 0, 1 << 20, 10)));
  // Next to it, in another segment, the same generation again, or newer:
  // let through.
  EXPECT_TRUE(AdmitOne(order, Op(1, 900, 100, 10)));
  EXPECT_TRUE(AdmitOne(order, Op(1, 1100, 100, 10)));
  EXPECT_TRUE(AdmitOne(order, Op(2, 1000, 100, 10)));
  EXPECT_TRUE(AdmitOne(order, Op(1, 1000, 100, 20)));
  EXPECT_TRUE(AdmitOne(order, Op(1, 1050, 100, 30)));
  EXPECT_FALSE(AdmitOne(order, Op(1, 1000, 60, 20)));
  // Generation 0 (a master before generations) is never ordered.
  EXPECT_TRUE(AdmitOne(order, Op(1, 1000, 100, 0)));
}

TEST(WriteOrderTest, IntervalsAreReplacedSoTheirNumberStaysBounded) {
  WriteOrder order;
  // One grant written in pieces is one interval.
  for (uint64_t off = 0; off < 4096; off += 512) {
    ASSERT_TRUE(AdmitOne(order, Op(1, off, 512, 5)));
  }
  EXPECT_EQ(order.interval_count(), 1u);
  // A newer write in the middle splits it in three; one over all of it
  // leaves one.
  ASSERT_TRUE(AdmitOne(order, Op(1, 1024, 1024, 6)));
  EXPECT_EQ(order.interval_count(), 3u);
  EXPECT_FALSE(AdmitOne(order, Op(1, 1500, 1, 5)));
  EXPECT_TRUE(AdmitOne(order, Op(1, 3000, 10, 5)));
  ASSERT_TRUE(AdmitOne(order, Op(1, 0, 4096, 7)));
  EXPECT_EQ(order.interval_count(), 1u);
  // Ranges reused over and over by new grants (a small pool under churn):
  // as many intervals as live ranges, not as writes.
  uint64_t generation = 100;
  for (int round = 0; round < 1000; ++round) {
    for (uint64_t slot = 0; slot < 8; ++slot) {
      ASSERT_TRUE(AdmitOne(order, Op(1, slot * 4096, 4096, ++generation)));
    }
  }
  EXPECT_EQ(order.interval_count(), 8u);
  // A new key forgets everything.
  order.Rekey(2);
  EXPECT_EQ(order.interval_count(), 0u);
  EXPECT_TRUE(AdmitOne(order, Op(1, 0, 4096, 1), 2));
  // Ops checked under the replaced key are let through unordered.
  order.Rekey(3);
  EXPECT_TRUE(AdmitOne(order, Op(1, 0, 4096, 50), 3));
  EXPECT_TRUE(AdmitOne(order, Op(1, 0, 4096, 1), 2));
  EXPECT_FALSE(AdmitOne(order, Op(1, 0, 4096, 1), 3));
}

TEST(WriteOrderTest, WhatIsRecordedIsTheGrantNotEachOpsBytes) {
  WriteOrder order;
  // However a client cuts its writes, its grant is one interval.
  for (uint64_t off = 0; off < 4096; off += 2) {
    ASSERT_TRUE(AdmitOne(order, OpIn(0, 4096, off, 1, 5)));
  }
  EXPECT_EQ(order.interval_count(), 1u);
  // B took the first half of that range and wrote it. The old token names
  // all of it: even a write into the half nobody has written since is
  // refused.
  ASSERT_TRUE(AdmitOne(order, OpIn(0, 2048, 0, 2048, 6)));
  EXPECT_FALSE(AdmitOne(order, OpIn(0, 4096, 3000, 10, 5)));
  EXPECT_TRUE(AdmitOne(order, OpIn(2048, 2048, 3000, 10, 7)));
  EXPECT_EQ(order.interval_count(), 2u);
}

TEST(WriteOrderTest, ANewerWriteWaitsOnlyForOlderOverlappingOnesInFlight) {
  WriteOrder order;
  WriteOrder::Op older[] = {Op(1, 0, 4096, 10)};
  WriteOrder::Pass older_pass = order.Admit(1, older);
  ASSERT_TRUE(older[0].admitted);
  EXPECT_FALSE(older_pass.blocked());
  // Elsewhere, or with the same generation (a retry): nothing to wait for.
  WriteOrder::Op apart[] = {Op(1, 4096, 4096, 20), Op(2, 0, 4096, 20)};
  EXPECT_FALSE(order.Admit(1, apart).blocked());
  WriteOrder::Op again[] = {Op(1, 0, 4096, 10)};
  EXPECT_FALSE(order.Admit(1, again).blocked());
  // Overlapping and newer: blocked until the older pass ends.
  WriteOrder::Op newer[] = {Op(1, 2048, 4096, 20)};
  WriteOrder::Pass newer_pass = order.Admit(1, newer);
  ASSERT_TRUE(newer[0].admitted);
  ASSERT_TRUE(newer_pass.blocked());
  int resumed = 0;
  ASSERT_TRUE(order.Wait(newer_pass, [&] { ++resumed; }));
  EXPECT_EQ(resumed, 0);
  older_pass.Release();
  EXPECT_EQ(resumed, 1);
  EXPECT_FALSE(order.Wait(newer_pass, [&] { ++resumed; }));
  newer_pass.Release();
  EXPECT_EQ(resumed, 1);
  // Only the bytes being copied count: a newer grant over the older one's
  // whose op copies other bytes goes ahead.
  WriteOrder::Op slow[] = {OpIn(8192, 8192, 8192, 100, 25)};
  WriteOrder::Pass slow_pass = order.Admit(1, slow);
  ASSERT_TRUE(slow[0].admitted);
  WriteOrder::Op fast[] = {OpIn(8192, 8192, 12288, 100, 26)};
  EXPECT_FALSE(order.Admit(1, fast).blocked());
  slow_pass.Release();
  // A pass whose older write ended before it waited does not wait.
  WriteOrder::Op a[] = {Op(1, 0, 100, 30)};
  WriteOrder::Pass a_pass = order.Admit(1, a);
  WriteOrder::Op b[] = {Op(1, 0, 100, 40)};
  WriteOrder::Pass b_pass = order.Admit(1, b);
  ASSERT_TRUE(b_pass.blocked());
  a_pass.Release();
  EXPECT_FALSE(order.Wait(b_pass, [&] { ++resumed; }));
  EXPECT_EQ(resumed, 1);
}

// ------------------------------------------------------- over the data plane

constexpr uint64_t kSeg = 3;
constexpr uint64_t kSegSize = 4 << 20;
const std::string kNode = "order-node";

const uint8_t* Bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

class WriteGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_.assign(kSegSize, 0);
    table_.Add(kSeg, {mem_.data(), mem_.size()});
    key_ = std::make_shared<cap::Key>(crypto::RandomBytes(cap::kKeySize));
    TcpDataServerOptions o;
    o.require_capabilities = true;
    server_ = std::make_unique<TcpDataServer>(&table_, kNode, o);
    ASSERT_TRUE(server_->Start("127.0.0.1", 0).ok());
    server_->SetCapabilityKey(key_);
    ep_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  // A master's WRITE token for [off, off+len) of generation `generation`.
  std::string WriteToken(uint64_t off, uint64_t len, uint64_t generation,
                         const cap::Key* key = nullptr) {
    return (key ? key : key_.get())
        ->SignRange(kSeg, off, len, cap::kOpWrite, cap::WallNowMs() + 60000,
                    generation);
  }

  // Writes `len` bytes of `fill` at `off` with a token of `generation`.
  ErrorCode Write(TcpDataClient& client, uint64_t off, uint64_t len,
                  uint8_t fill, uint64_t generation,
                  const cap::Key* key = nullptr) {
    const std::vector<uint8_t> data(len, fill);
    const std::string token = WriteToken(off, len, generation, key);
    std::vector<WriteOp> ops = {{kSeg, off, len, data.data()}};
    ops[0].grant = Grant{off, len, Bytes(token)};
    Status s = client.Write(ep_, kNode, ops);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ops[0].result;
  }
  ErrorCode Write(uint64_t off, uint64_t len, uint8_t fill, uint64_t generation,
                  const cap::Key* key = nullptr) {
    return Write(client_, off, len, fill, generation, key);
  }

  // What [off, off+len) holds, read back through the server.
  std::vector<uint8_t> ReadBack(uint64_t off, uint64_t len) {
    std::vector<uint8_t> out(len, 0xFF);
    const std::string token = key_->SignRange(kSeg, off, len, cap::kOpRead,
                                              cap::WallNowMs() + 60000, 0);
    std::vector<ReadOp> ops = {{kSeg, off, len, out.data()}};
    ops[0].grant = Grant{off, len, Bytes(token)};
    EXPECT_TRUE(client_.Read(ep_, kNode, ops).ok());
    EXPECT_EQ(ops[0].result, ErrorCode::OK);
    return out;
  }

  // A raw connection past its HELLO, for a writer that sends part of its
  // payload and stops: a write that is still copying, as slow as the test
  // wants it.
  tcp::socket RawConnect() {
    tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
    wire::Header h;
    h.op = static_cast<uint16_t>(wire::Op::kHello);
    h.body_len = kNode.size();
    std::vector<uint8_t> f(wire::kHeaderSize);
    wire::EncodeHeader(h, f.data());
    f.insert(f.end(), kNode.begin(), kNode.end());
    asio::write(s, asio::buffer(f));
    uint8_t raw[wire::kHeaderSize];
    asio::read(s, asio::buffer(raw));
    const wire::Header rh = wire::DecodeHeader(raw);
    EXPECT_EQ(rh.status, 0);
    std::string id(static_cast<size_t>(rh.body_len), '\0');
    asio::read(s, asio::buffer(id));
    return s;
  }

  // Header and descriptor of a one-op WRITE of [off, off+len).
  std::vector<uint8_t> WriteHead(uint64_t off, uint64_t len,
                                 const std::string& token) {
    wire::Header h;
    h.op = static_cast<uint16_t>(wire::Op::kWrite);
    h.count = 1;
    h.body_len = wire::kRangeSize + len;
    std::vector<uint8_t> f(wire::kHeaderSize + wire::kRangeSize);
    wire::EncodeHeader(h, f.data());
    wire::EncodeRange(wire::Range{kSeg, off, len, off, len, Bytes(token)},
                      f.data() + wire::kHeaderSize);
    return f;
  }

  // Reads a one-op response off `s`; the op's code.
  static ErrorCode ReadResult(tcp::socket& s) {
    uint8_t raw[wire::kHeaderSize + wire::kResultSize];
    asio::read(s, asio::buffer(raw));
    const wire::Header h = wire::DecodeHeader(raw);
    EXPECT_EQ(h.status, 0);
    EXPECT_EQ(h.count, 1u);
    return ErrorCodeFromInt(
        static_cast<int32_t>(wire::GetLe<uint32_t>(raw + wire::kHeaderSize)));
  }

  std::vector<uint8_t> mem_;
  SegmentTable table_;
  std::shared_ptr<cap::Key> key_;
  std::unique_ptr<TcpDataServer> server_;
  TcpDataClient client_;
  std::string ep_;
  asio::io_context io_;
};

TEST_F(WriteGenerationTest, AStaleWriteOverANewerValueIsRefused) {
  // B (generation 200) took the range; A's token (100) is still valid.
  ASSERT_EQ(Write(0, 65536, 'B', 200), ErrorCode::OK);
  EXPECT_EQ(Write(0, 65536, 'A', 100), ErrorCode::INVALID_WRITE);
  // Overlapping any part of B's bytes is enough.
  EXPECT_EQ(Write(60000, 10000, 'A', 100), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(server_->stats().write_generation_refusals.load(), 2u);
  EXPECT_EQ(server_->stats().write_guard_refusals.load(), 0u);
  EXPECT_EQ(ReadBack(0, 65536), std::vector<uint8_t>(65536, 'B'));
  EXPECT_EQ(ReadBack(65536, 4464), std::vector<uint8_t>(4464, 0));
  // A refused op in a batch costs only itself: the others land.
  const std::vector<uint8_t> a(4096, 'A'), c(4096, 'C');
  const std::string stale = WriteToken(0, 4096, 100);
  const std::string fresh = WriteToken(131072, 4096, 300);
  std::vector<WriteOp> ops = {{kSeg, 0, 4096, a.data()},
                              {kSeg, 131072, 4096, c.data()}};
  ops[0].grant = Grant{0, 4096, Bytes(stale)};
  ops[1].grant = Grant{131072, 4096, Bytes(fresh)};
  ASSERT_TRUE(client_.Write(ep_, kNode, ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::INVALID_WRITE);
  EXPECT_EQ(ops[1].result, ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, 4096), std::vector<uint8_t>(4096, 'B'));
  EXPECT_EQ(ReadBack(131072, 4096), c);
}

TEST_F(WriteGenerationTest, NewerWritesAndRetriesLand) {
  ASSERT_EQ(Write(0, 8192, 'A', 100), ErrorCode::OK);
  // A retry of the same grant, and the range's next owner.
  EXPECT_EQ(Write(0, 8192, 'a', 100), ErrorCode::OK);
  EXPECT_EQ(Write(0, 8192, 'B', 200), ErrorCode::OK);
  // The next owner of a bigger range that covers it, in two pieces.
  EXPECT_EQ(Write(0, 4096, 'C', 300), ErrorCode::OK);
  EXPECT_EQ(Write(4096, 12288, 'C', 300), ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, 16384), std::vector<uint8_t>(16384, 'C'));
  EXPECT_EQ(server_->stats().write_generation_refusals.load(), 0u);
  EXPECT_EQ(server_->write_record_intervals(), 1u);
}

TEST_F(WriteGenerationTest, WritesOfOtherRangesAreIndependent) {
  ASSERT_EQ(Write(8192, 4096, 'B', 200), ErrorCode::OK);
  // Older generations right before, right after and far away: no overlap.
  EXPECT_EQ(Write(4096, 4096, 'x', 100), ErrorCode::OK);
  EXPECT_EQ(Write(12288, 4096, 'y', 100), ErrorCode::OK);
  EXPECT_EQ(Write(1 << 20, 4096, 'z', 50), ErrorCode::OK);
  EXPECT_EQ(ReadBack(4096, 4096), std::vector<uint8_t>(4096, 'x'));
  EXPECT_EQ(ReadBack(8192, 4096), std::vector<uint8_t>(4096, 'B'));
  EXPECT_EQ(ReadBack(12288, 4096), std::vector<uint8_t>(4096, 'y'));
  EXPECT_EQ(server_->stats().write_generation_refusals.load(), 0u);
  // One byte more on either side and they overlap B.
  EXPECT_EQ(Write(4096, 4097, 'x', 100), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(Write(12287, 4096, 'y', 100), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(ReadBack(8192, 4096), std::vector<uint8_t>(4096, 'B'));
}

// A client may write its grant in pieces (a ranged write, a retry of part
// of it): the record holds the grant, once, and the token of a grant that
// a newer one now overlaps is refused anywhere in it.
TEST_F(WriteGenerationTest, TheRecordHoldsGrantsNotPieces) {
  const std::string a = WriteToken(0, 65536, 100);
  for (uint64_t off = 0; off < 65536; off += 8192) {
    const std::vector<uint8_t> piece(100, 'a');
    std::vector<WriteOp> ops = {{kSeg, off, piece.size(), piece.data()}};
    ops[0].grant = Grant{0, 65536, Bytes(a)};
    ASSERT_TRUE(client_.Write(ep_, kNode, ops).ok());
    ASSERT_EQ(ops[0].result, ErrorCode::OK);
  }
  EXPECT_EQ(server_->write_record_intervals(), 1u);
  // B took [0, 16 KiB) of A's old range.
  ASSERT_EQ(Write(0, 16384, 'B', 200), ErrorCode::OK);
  const std::vector<uint8_t> late(4096, 'A');
  std::vector<WriteOp> ops = {{kSeg, 32768, late.size(), late.data()}};
  ops[0].grant = Grant{0, 65536, Bytes(a)};
  ASSERT_TRUE(client_.Write(ep_, kNode, ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::INVALID_WRITE);
  std::vector<uint8_t> before(4096, 0);
  std::fill_n(before.begin(), 100, 'a');  // A's own piece there
  EXPECT_EQ(ReadBack(32768, 4096), before);
  EXPECT_EQ(ReadBack(0, 16384), std::vector<uint8_t>(16384, 'B'));
}

// Old-peer degradation: a master from before write generations signs 0.
// Such writes land as they always did, and leave the record as it was.
TEST_F(WriteGenerationTest, GenerationZeroFromAnOlderMasterIsNotOrdered) {
  ASSERT_EQ(Write(0, 4096, 'A', 0), ErrorCode::OK);
  EXPECT_EQ(Write(0, 4096, 'B', 0), ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, 4096), std::vector<uint8_t>(4096, 'B'));
  EXPECT_EQ(server_->write_record_intervals(), 0u);
  ASSERT_EQ(Write(0, 4096, 'C', 500), ErrorCode::OK);
  EXPECT_EQ(Write(0, 4096, 'D', 0), ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, 4096), std::vector<uint8_t>(4096, 'D'));
  EXPECT_EQ(Write(0, 4096, 'E', 400), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(server_->stats().write_generation_refusals.load(), 1u);
}

TEST_F(WriteGenerationTest, ANewKeyForgetsTheRecordTheSameKeyKeepsIt) {
  ASSERT_EQ(Write(0, 4096, 'B', 200), ErrorCode::OK);
  // The prefetch buffer's mount hands over the same key again.
  server_->SetCapabilityKey(std::make_shared<cap::Key>(key_->raw()));
  EXPECT_EQ(Write(0, 4096, 'A', 100), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(server_->write_record_intervals(), 1u);
  // A remount at a new master: a new key, generations of its own.
  key_ = std::make_shared<cap::Key>(crypto::RandomBytes(cap::kKeySize));
  server_->SetCapabilityKey(key_);
  EXPECT_EQ(server_->write_record_intervals(), 0u);
  EXPECT_EQ(Write(0, 4096, 'N', 100), ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, 4096), std::vector<uint8_t>(4096, 'N'));
}

// A's write (older) has passed the check and is still copying when B's
// (newer) arrives for the same range: B's bytes go in after A's last byte,
// so the range ends up all B, never A's tail over B's head.
TEST_F(WriteGenerationTest, ANewerWriteWaitsForAnOlderOneStillCopying) {
  constexpr uint64_t kLen = 1 << 20;
  const std::string a_token = WriteToken(0, kLen, 100);
  tcp::socket a = RawConnect();
  const std::vector<uint8_t> a_bytes(kLen, 'A');
  asio::write(a, asio::buffer(WriteHead(0, kLen, a_token)));
  asio::write(a, asio::buffer(a_bytes.data(), kLen / 2));
  // A is admitted (its range recorded) and copying.
  ASSERT_TRUE(WaitUntil([&] { return server_->write_record_intervals() == 1; },
                        std::chrono::seconds(10)));

  // Elsewhere, a newer write does not wait.
  EXPECT_EQ(Write(2 * kLen, 4096, 'X', 300), ErrorCode::OK);
  EXPECT_EQ(server_->stats().write_generation_waits.load(), 0u);
  // An even older one of A's range is refused at once.
  EXPECT_EQ(Write(0, 4096, 'Z', 50), ErrorCode::INVALID_WRITE);

  TcpDataClient b_client;
  auto b = std::async(std::launch::async,
                      [&] { return Write(b_client, 0, kLen, 'B', 200); });
  ASSERT_TRUE(
      WaitUntil([&] { return server_->stats().write_generation_waits == 1; },
                std::chrono::seconds(10)));
  // B is held while A has not finished.
  EXPECT_EQ(b.wait_for(std::chrono::milliseconds(0)),
            std::future_status::timeout);
  asio::write(a, asio::buffer(a_bytes.data() + kLen / 2, kLen / 2));
  EXPECT_EQ(ReadResult(a), ErrorCode::OK);
  EXPECT_EQ(b.get(), ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, kLen), std::vector<uint8_t>(kLen, 'B'));
  EXPECT_EQ(server_->stats().write_generation_waits.load(), 1u);
}

// An older writer that gives up mid-copy (its connection closes) releases
// the newer one.
TEST_F(WriteGenerationTest, AnOlderWriterThatDisconnectsReleasesTheNewerOne) {
  constexpr uint64_t kLen = 256 << 10;
  const std::string a_token = WriteToken(0, kLen, 100);
  tcp::socket a = RawConnect();
  const std::vector<uint8_t> a_bytes(kLen / 2, 'A');
  asio::write(a, asio::buffer(WriteHead(0, kLen, a_token)));
  asio::write(a, asio::buffer(a_bytes));
  ASSERT_TRUE(WaitUntil([&] { return server_->write_record_intervals() == 1; },
                        std::chrono::seconds(10)));
  TcpDataClient b_client;
  auto b = std::async(std::launch::async,
                      [&] { return Write(b_client, 0, kLen, 'B', 200); });
  ASSERT_TRUE(
      WaitUntil([&] { return server_->stats().write_generation_waits == 1; },
                std::chrono::seconds(10)));
  a.close();
  EXPECT_EQ(b.get(), ErrorCode::OK);
  EXPECT_EQ(ReadBack(0, kLen), std::vector<uint8_t>(kLen, 'B'));
}

// Stop() with a write waiting for another: no hang, no crash; the waiting
// client sees its connection close.
TEST_F(WriteGenerationTest, StopWithAWriteWaiting) {
  constexpr uint64_t kLen = 64 << 10;
  const std::string a_token = WriteToken(0, kLen, 100);
  tcp::socket a = RawConnect();
  asio::write(a, asio::buffer(WriteHead(0, kLen, a_token)));
  ASSERT_TRUE(WaitUntil([&] { return server_->write_record_intervals() == 1; },
                        std::chrono::seconds(10)));
  TcpDataClient b_client;
  auto b = std::async(std::launch::async, [&] {
    const std::vector<uint8_t> data(kLen, 'B');
    const std::string token = WriteToken(0, kLen, 200);
    std::vector<WriteOp> ops = {{kSeg, 0, kLen, data.data()}};
    ops[0].grant = Grant{0, kLen, Bytes(token)};
    return b_client.Write(ep_, kNode, ops).code();
  });
  ASSERT_TRUE(
      WaitUntil([&] { return server_->stats().write_generation_waits == 1; },
                std::chrono::seconds(10)));
  server_->Stop();
  EXPECT_EQ(b.get(), ErrorCode::TRANSFER_FAIL);
}

}  // namespace
}  // namespace kvpool
