// The data server's capability checks (common/capability.h): with a key,
// no op touches segment memory or the SSD without the master's token.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/capability.h"
#include "common/crypto.h"
#include "transport/segment_table.h"
#include "transport/tcp_data_client.h"
#include "transport/tcp_data_server.h"

namespace kvpool {
namespace {

constexpr uint64_t kSeg = 7;
constexpr uint64_t kSegSize = 1 << 20;
const std::string kNode = "cap-node";

const uint8_t* Bytes(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

class CapabilityCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_.assign(kSegSize, 0x11);
    table_.Add(kSeg, {mem_.data(), mem_.size()});
    key_ = std::make_shared<cap::Key>(crypto::RandomBytes(cap::kKeySize));
    TcpDataServerOptions o;
    o.require_capabilities = true;
    server_ = std::make_unique<TcpDataServer>(&table_, kNode, o);
    server_->SetSsdReadHandler([this](std::span<KeyReadOp> ops) {
      for (auto& op : ops) {
        std::memset(op.dest, 'S', op.length);
        op.result = ErrorCode::OK;
        std::lock_guard lock(mu_);
        ssd_reads_.push_back(op.key);
      }
    });
    server_->SetPrefetchHandler(
        [this](const std::string&, const std::vector<std::string>& keys, bool) {
          std::lock_guard lock(mu_);
          for (const auto& k : keys) prefetched_.push_back(k);
          return std::vector<ErrorCode>(keys.size(), ErrorCode::OK);
        });
    ASSERT_TRUE(server_->Start("127.0.0.1", 0).ok());
    ep_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  std::string ReadToken(uint64_t off, uint64_t len, int64_t ttl_ms = 10000) {
    return key_->SignRange(kSeg, off, len, cap::kOpRead,
                           cap::WallNowMs() + ttl_ms, 0);
  }

  // One READ of [off, off+len) under the grant [goff, goff+glen).
  ErrorCode Read(uint64_t off, uint64_t len, uint64_t goff, uint64_t glen,
                 const std::string& token, std::vector<uint8_t>* out) {
    out->assign(len, 0);
    std::vector<ReadOp> ops = {{kSeg, off, len, out->data()}};
    ops[0].grant = Grant{goff, glen, token.empty() ? nullptr : Bytes(token)};
    Status s = client_.Read(ep_, kNode, ops);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ops[0].result;
  }

  ErrorCode Write(uint64_t off, const std::vector<uint8_t>& data,
                  const std::string& token) {
    std::vector<WriteOp> ops = {{kSeg, off, data.size(), data.data()}};
    ops[0].grant =
        Grant{off, data.size(), token.empty() ? nullptr : Bytes(token)};
    Status s = client_.Write(ep_, kNode, ops);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return ops[0].result;
  }

  std::vector<uint8_t> mem_;
  SegmentTable table_;
  std::shared_ptr<cap::Key> key_;
  std::unique_ptr<TcpDataServer> server_;
  TcpDataClient client_;
  std::string ep_;
  std::mutex mu_;
  std::vector<std::string> ssd_reads_, prefetched_;
};

TEST_F(CapabilityCheckTest, NothingIsServedBeforeTheNodeHasAKey) {
  std::vector<uint8_t> out;
  EXPECT_EQ(Read(0, 64, 0, 64, "", &out), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(Write(0, std::vector<uint8_t>(64, 0xEE), ""),
            ErrorCode::ILLEGAL_CLIENT);
  std::vector<uint8_t> buf(4096);
  std::vector<KeyReadOp> keys = {{"t", "k", 100, buf.data()}};
  ASSERT_TRUE(client_.ReadKeys(ep_, kNode, keys).ok());
  EXPECT_EQ(keys[0].result, ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(mem_[0], 0x11);
  std::lock_guard lock(mu_);
  EXPECT_TRUE(ssd_reads_.empty());
}

TEST_F(CapabilityCheckTest, RawReadOfARangeNobodyWasGrantedIsRefused) {
  server_->SetCapabilityKey(key_);
  std::memset(mem_.data(), 0x42, 4096);
  std::vector<uint8_t> out;
  // No token, a forged one, one made with another key: all refused, and
  // the destination is untouched.
  EXPECT_EQ(Read(0, 4096, 0, 4096, "", &out), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(Read(0, 4096, 0, 4096, std::string(cap::kTokenSize, 'x'), &out),
            ErrorCode::ILLEGAL_CLIENT);
  cap::Key other(crypto::RandomBytes(cap::kKeySize));
  EXPECT_EQ(Read(0, 4096, 0, 4096,
                 other.SignRange(kSeg, 0, 4096, cap::kOpRead,
                                 cap::WallNowMs() + 10000, 0),
                 &out),
            ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(server_->stats().capability_refusals.load(), 3u);
  // The master's token reads exactly its range.
  EXPECT_EQ(Read(0, 4096, 0, 4096, ReadToken(0, 4096), &out), ErrorCode::OK);
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 0x42));
}

TEST_F(CapabilityCheckTest, ATokenCoversItsRangeAndNothingBeyond) {
  server_->SetCapabilityKey(key_);
  const std::string t = ReadToken(8192, 4096);
  std::vector<uint8_t> out;
  // A part of the grant may be read (ranged gets).
  EXPECT_EQ(Read(9000, 100, 8192, 4096, t, &out), ErrorCode::OK);
  // Past its end, before its start, or claiming a bigger grant: refused.
  EXPECT_EQ(Read(12000, 4096, 8192, 4096, t, &out), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(Read(4096, 4096, 8192, 4096, t, &out), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(Read(8192, 8192, 8192, 8192, t, &out), ErrorCode::ILLEGAL_CLIENT);
  // A huge offset cannot wrap around the containment check.
  EXPECT_EQ(Read(~uint64_t{0} - 10, 100, 8192, 4096, t, &out),
            ErrorCode::ILLEGAL_CLIENT);
}

TEST_F(CapabilityCheckTest, AReadTokenCannotWriteAndAnExpiredOneIsRefused) {
  server_->SetCapabilityKey(key_);
  const std::vector<uint8_t> evil(4096, 0xEE);
  // The attack that made a get return attacker bytes: a WRITE into a
  // replica the writer was only allowed to read.
  EXPECT_EQ(Write(0, evil, ReadToken(0, 4096)), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(Write(0, evil, ""), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(mem_[0], 0x11);
  EXPECT_EQ(mem_[4095], 0x11);
  const std::string expired =
      key_->SignRange(kSeg, 0, 4096, cap::kOpWrite, cap::WallNowMs() - 1, 0);
  EXPECT_EQ(Write(0, evil, expired), ErrorCode::LEASE_EXPIRED);
  EXPECT_EQ(mem_[0], 0x11);
  const std::string ok = key_->SignRange(kSeg, 0, 4096, cap::kOpWrite,
                                         cap::WallNowMs() + 10000, 0);
  EXPECT_EQ(Write(0, evil, ok), ErrorCode::OK);
  EXPECT_EQ(mem_[0], 0xEE);
}

TEST_F(CapabilityCheckTest, ANewKeyVoidsEveryEarlierToken) {
  server_->SetCapabilityKey(key_);
  const std::string t = ReadToken(0, 64);
  std::vector<uint8_t> out;
  EXPECT_EQ(Read(0, 64, 0, 64, t, &out), ErrorCode::OK);
  server_->SetCapabilityKey(
      std::make_shared<cap::Key>(crypto::RandomBytes(cap::kKeySize)));
  EXPECT_EQ(Read(0, 64, 0, 64, t, &out), ErrorCode::ILLEGAL_CLIENT);
}

TEST_F(CapabilityCheckTest, SsdReadsAndPrefetchesNeedATokenForTheirKey) {
  server_->SetCapabilityKey(key_);
  const int64_t exp = cap::WallNowMs() + 10000;
  std::vector<uint8_t> a(4096), b(4096), c(4096);
  std::vector<KeyReadOp> ops = {
      {"t", "granted", 100, a.data(), ErrorCode::OK,
       key_->SignKey("t", "granted", cap::kOpSsdRead, exp, 0)},
      // A token for another key, or another tenant's same key.
      {"t", "secret", 100, b.data(), ErrorCode::OK,
       key_->SignKey("t", "granted", cap::kOpSsdRead, exp, 0)},
      {"u", "granted", 100, c.data(), ErrorCode::OK,
       key_->SignKey("t", "granted", cap::kOpSsdRead, exp, 0)}};
  ASSERT_TRUE(client_.ReadKeys(ep_, kNode, ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::OK);
  EXPECT_EQ(ops[1].result, ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(ops[2].result, ErrorCode::ILLEGAL_CLIENT);
  {
    std::lock_guard lock(mu_);
    EXPECT_EQ(ssd_reads_, std::vector<std::string>{"granted"});
  }
  // A prefetch-only token (what a read-only lookup grants) cannot read.
  std::vector<KeyReadOp> peek = {
      {"t", "granted", 100, a.data(), ErrorCode::OK,
       key_->SignKey("t", "granted", cap::kOpPrefetch, exp, 0)}};
  ASSERT_TRUE(client_.ReadKeys(ep_, kNode, peek).ok());
  EXPECT_EQ(peek[0].result, ErrorCode::ILLEGAL_CLIENT);

  std::vector<ErrorCode> results;
  const std::vector<std::string> tokens = {
      key_->SignKey("t", "p1", cap::kOpPrefetch, exp, 0), ""};
  ASSERT_TRUE(
      client_.Prefetch(ep_, kNode, "t", {"p1", "p2"}, &results, &tokens).ok());
  EXPECT_EQ(results,
            (std::vector<ErrorCode>{ErrorCode::OK, ErrorCode::ILLEGAL_CLIENT}));
  std::lock_guard lock(mu_);
  EXPECT_EQ(prefetched_, std::vector<std::string>{"p1"});
}

TEST_F(CapabilityCheckTest, WithoutAKeyFromTheMasterTheNodeServesUnchecked) {
  // What a node does for a master too old to sign: nothing is checked.
  server_->SetCapabilityKey(nullptr);
  std::vector<uint8_t> out;
  EXPECT_EQ(Read(0, 64, 0, 0, "", &out), ErrorCode::OK);
  EXPECT_EQ(server_->stats().capability_refusals.load(), 0u);
}

}  // namespace
}  // namespace kvpool
