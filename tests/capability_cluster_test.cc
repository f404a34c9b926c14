// Data-plane capabilities end to end on a LocalCluster: the master signs
// what it hands out, nodes refuse everything else. The attacks are the ones
// a raw client on the network could make knowing only a node's address and
// id (both printed by /status).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/capability.h"
#include "kvpool/local_cluster.h"
#include "master/master_server.h"
#include "node/node.h"
#include "rpc/master_client.h"
#include "tests/test_util.h"
#include "transport/tcp_data_client.h"

namespace kvpool {
namespace {

using kvpool::testing::RandomBytes;

class CapabilityClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalClusterOptions o;
    o.num_nodes = 1;
    cluster_ = std::make_unique<LocalCluster>(o);
    ASSERT_TRUE(cluster_->Start().ok());
    ClientConfig c;
    c.transport = TransportMode::kTcp;
    auto r = cluster_->NewClient(c);
    ASSERT_TRUE(r.ok());
    client_ = std::move(r.value());
  }

  // What the master answers a get of `key` (a lease and its tokens).
  rpc::GetReplicaListResponse Replicas(const std::string& key) {
    MasterClient m(cluster_->master_address(), 5000);
    rpc::KeyRequest req;
    req.set_tenant("default");
    req.set_key(key);
    rpc::GetReplicaListResponse resp;
    EXPECT_TRUE(
        m.Call(&rpc::MasterService::Stub::GetReplicaList, req, &resp).ok());
    return resp;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
};

TEST_F(CapabilityClusterTest, GetsAndPutsOverTcpCarryTheMastersTokens) {
  const std::string v = RandomBytes(1 << 20, 1);
  ASSERT_TRUE(client_->Put("k", v).ok());
  EXPECT_EQ(client_->Get("k").value(), v);
  auto resp = Replicas("k");
  ASSERT_EQ(resp.replicas_size(), 1);
  EXPECT_EQ(resp.replicas(0).memory().capability().size(), 40u);
  EXPECT_GT(client_->counters().tcp_bytes_read, 0u);
}

TEST_F(CapabilityClusterTest, ARawClientReadsNothingItWasNotGranted) {
  const std::string secret = RandomBytes(64 << 10, 2);
  ASSERT_TRUE(client_->Put("secret", secret).ok());
  Node& node = cluster_->node(0);
  TcpDataClient raw;
  // Dumping the segment from offset 0, as the attack did: every range is
  // refused and the buffer stays as it was.
  std::vector<uint8_t> buf(1 << 20, 0);
  std::vector<ReadOp> ops;
  for (uint64_t off = 0; off < (8u << 20); off += 1 << 20) {
    ops.push_back(ReadOp{node.segment_id(), off, 1 << 20, buf.data()});
  }
  ASSERT_TRUE(raw.Read(node.data_endpoint(), node.node_id(), ops).ok());
  for (const auto& op : ops) EXPECT_EQ(op.result, ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(buf, std::vector<uint8_t>(1 << 20, 0));

  // With the token of a get, exactly that replica reads.
  auto resp = Replicas("secret");
  ASSERT_EQ(resp.replicas_size(), 1);
  const auto& loc = resp.replicas(0).memory();
  std::vector<uint8_t> got(loc.length());
  std::vector<ReadOp> one = {
      {loc.segment_id(), loc.offset(), loc.length(), got.data()}};
  one[0].grant = GrantOf(loc);
  ASSERT_TRUE(raw.Read(node.data_endpoint(), node.node_id(), one).ok());
  ASSERT_EQ(one[0].result, ErrorCode::OK);
  EXPECT_EQ(std::string(got.begin(), got.end()), secret);
  // The same token does not stretch to the bytes after the replica.
  std::vector<ReadOp> more = {
      {loc.segment_id(), loc.offset(), loc.length() + 4096, buf.data()}};
  more[0].grant = Grant{loc.offset(), loc.length() + 4096, GrantOf(loc).token};
  ASSERT_TRUE(raw.Read(node.data_endpoint(), node.node_id(), more).ok());
  EXPECT_EQ(more[0].result, ErrorCode::ILLEGAL_CLIENT);
}

TEST_F(CapabilityClusterTest, ARawWriteCannotChangeAnotherKeysValue) {
  const std::string v = RandomBytes(4096, 3);
  ASSERT_TRUE(client_->Put("victim", v).ok());
  auto resp = Replicas("victim");
  ASSERT_EQ(resp.replicas_size(), 1);
  const auto& loc = resp.replicas(0).memory();
  Node& node = cluster_->node(0);
  TcpDataClient raw;
  const std::vector<uint8_t> evil(loc.length(), 'X');
  // No token, then the get's read token: both refused.
  std::vector<WriteOp> w = {
      {loc.segment_id(), loc.offset(), loc.length(), evil.data()}};
  ASSERT_TRUE(raw.Write(node.data_endpoint(), node.node_id(), w).ok());
  EXPECT_EQ(w[0].result, ErrorCode::ILLEGAL_CLIENT);
  w[0].grant = GrantOf(loc);
  ASSERT_TRUE(raw.Write(node.data_endpoint(), node.node_id(), w).ok());
  EXPECT_EQ(w[0].result, ErrorCode::ILLEGAL_CLIENT);
  // A put's own write token is for its own replica only.
  MasterClient m(cluster_->master_address(), 5000);
  rpc::PutStartRequest ps;
  ps.set_tenant("default");
  ps.set_key("mine");
  ps.set_size(4096);
  rpc::PutStartResponse pr;
  ASSERT_TRUE(m.Call(&rpc::MasterService::Stub::PutStart, ps, &pr).ok());
  ASSERT_EQ(pr.error_code(), 0);
  const auto& mine = pr.replicas(0).memory();
  ASSERT_NE(mine.offset(), loc.offset());
  w[0].grant = GrantOf(mine);
  ASSERT_TRUE(raw.Write(node.data_endpoint(), node.node_id(), w).ok());
  EXPECT_EQ(w[0].result, ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(client_->Get("victim").value(), v);
}

// A put's write token outlives its put by a few seconds. Once the node's
// directory holds a complete value in the range (the put's own, or the
// value of whoever took the range since), a write with the token is
// refused: the late-write hazard of a freed range.
TEST_F(CapabilityClusterTest, AValidWriteTokenCannotChangeACompleteValue) {
  MasterClient m(cluster_->master_address(), 5000);
  rpc::PutStartRequest ps;
  ps.set_tenant("default");
  ps.set_key("done");
  ps.set_size(4096);
  rpc::PutStartResponse pr;
  ASSERT_TRUE(m.Call(&rpc::MasterService::Stub::PutStart, ps, &pr).ok());
  ASSERT_EQ(pr.error_code(), 0);
  const rpc::MemoryLocation loc = pr.replicas(0).memory();
  Node& node = cluster_->node(0);
  TcpDataClient raw;
  const std::string v = RandomBytes(4096, 11);
  std::vector<WriteOp> w = {{loc.segment_id(), loc.offset(), loc.length(),
                             reinterpret_cast<const uint8_t*>(v.data())}};
  w[0].grant = GrantOf(loc);
  ASSERT_TRUE(raw.Write(node.data_endpoint(), node.node_id(), w).ok());
  ASSERT_EQ(w[0].result, ErrorCode::OK);  // the put's own write
  rpc::KeyRequest end;
  end.set_tenant("default");
  end.set_key("done");
  rpc::KeyStatus es;
  ASSERT_TRUE(m.Call(&rpc::MasterService::Stub::PutEnd, end, &es).ok());
  ASSERT_EQ(es.error_code(), 0);
  ASSERT_TRUE(kvpool::testing::WaitUntil(
      [&] { return node.directory_size() == 1; }, std::chrono::seconds(10)));
  // The same, still unexpired token: refused, the value intact.
  const std::string evil(4096, 'X');
  w[0].src = reinterpret_cast<const uint8_t*>(evil.data());
  ASSERT_TRUE(raw.Write(node.data_endpoint(), node.node_id(), w).ok());
  EXPECT_EQ(w[0].result, ErrorCode::INVALID_WRITE);
  EXPECT_EQ(client_->Get("done").value(), v);
}

// A put's write token outlives its value by a few seconds: A is put, then
// removed, and B takes A's range while A's token is still valid. A's WRITE
// must not land on B. The node refuses it because B's grant has a newer
// write generation than A's and has written the range (write generations,
// docs/security.md), whether or not its DRAM directory knows B yet, and on
// a node without a directory at all. Parameter: NodeConfig::dram_directory.
class StaleWriteTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    LocalClusterOptions o;
    o.num_nodes = 1;
    o.dram_directory = GetParam();
    // The node hands freed ranges back at its heartbeat.
    o.heartbeat_interval_ms = 50;
    cluster_ = std::make_unique<LocalCluster>(o);
    ASSERT_TRUE(cluster_->Start().ok());
    ClientConfig c;
    c.transport = TransportMode::kTcp;
    client_ = cluster_->NewClient(c).value();
    master_ = std::make_unique<MasterClient>(cluster_->master_address(), 5000);
  }

  rpc::MemoryLocation PutStart(const std::string& key, uint64_t size) {
    rpc::PutStartRequest ps;
    ps.set_tenant("default");
    ps.set_key(key);
    ps.set_size(size);
    rpc::PutStartResponse pr;
    EXPECT_TRUE(
        master_->Call(&rpc::MasterService::Stub::PutStart, ps, &pr).ok());
    EXPECT_EQ(pr.error_code(), 0);
    EXPECT_EQ(pr.replicas_size(), 1);
    return pr.replicas_size() == 1 ? pr.replicas(0).memory()
                                   : rpc::MemoryLocation();
  }

  void PutEnd(const std::string& key) {
    rpc::KeyRequest end;
    end.set_tenant("default");
    end.set_key(key);
    rpc::KeyStatus es;
    ASSERT_TRUE(
        master_->Call(&rpc::MasterService::Stub::PutEnd, end, &es).ok());
    ASSERT_EQ(es.error_code(), 0);
  }

  // A raw WRITE of `bytes` into the whole of `loc`, with `loc`'s token.
  ErrorCode RawWrite(const rpc::MemoryLocation& loc, const std::string& bytes) {
    Node& node = cluster_->node(0);
    std::vector<WriteOp> w = {{loc.segment_id(), loc.offset(), loc.length(),
                               reinterpret_cast<const uint8_t*>(bytes.data())}};
    w[0].grant = GrantOf(loc);
    EXPECT_TRUE(raw_.Write(node.data_endpoint(), node.node_id(), w).ok());
    return w[0].result;
  }

  // Puts A through the raw data plane, keeping its location and write
  // token, then removes it and waits until its range is free again.
  rpc::MemoryLocation PutAndRemoveA(uint64_t size) {
    const rpc::MemoryLocation a = PutStart("a", size);
    EXPECT_EQ(RawWrite(a, RandomBytes(size, 21)), ErrorCode::OK);
    PutEnd("a");
    EXPECT_TRUE(client_->Remove("a").ok());
    // With a directory the range is reusable once the node has dropped A.
    EXPECT_TRUE(kvpool::testing::WaitUntil(
        [&] {
          return cluster_->master().service().segments().HeldBytes(
                     SegmentKind::kMain) == 0;
        },
        std::chrono::seconds(10)));
    return a;
  }

  static uint64_t Generation(const rpc::MemoryLocation& loc) {
    return loc.capability().size() == cap::kTokenSize
               ? cap::TokenGeneration(
                     reinterpret_cast<const uint8_t*>(loc.capability().data()))
               : 0;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<MasterClient> master_;
  TcpDataClient raw_;
};

// B is complete (put by a client over TCP) when A's write arrives.
TEST_P(StaleWriteTest, ARemovedValuesTokenCannotOverwriteItsSuccessor) {
  constexpr uint64_t kSize = 64 << 10;
  const rpc::MemoryLocation a = PutAndRemoveA(kSize);
  const std::string b = RandomBytes(kSize, 22);
  ASSERT_TRUE(client_->Put("b", b).ok());
  rpc::KeyRequest req;
  req.set_tenant("default");
  req.set_key("b");
  rpc::GetReplicaListResponse got;
  ASSERT_TRUE(
      master_->Call(&rpc::MasterService::Stub::GetReplicaList, req, &got).ok());
  ASSERT_EQ(got.replicas_size(), 1);
  ASSERT_EQ(got.replicas(0).memory().segment_id(), a.segment_id());
  ASSERT_EQ(got.replicas(0).memory().offset(), a.offset());  // A's range
  // A read token carries no generation.
  EXPECT_EQ(Generation(got.replicas(0).memory()), 0u);

  EXPECT_EQ(RawWrite(a, std::string(kSize, 'X')), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(client_->Get("b").value(), b);
}

// B's put is still in flight (written, not yet complete) when A's write
// arrives: the window the directory guard cannot close.
TEST_P(StaleWriteTest, ARemovedValuesTokenCannotOverwriteAPutInFlight) {
  constexpr uint64_t kSize = 64 << 10;
  const rpc::MemoryLocation a = PutAndRemoveA(kSize);
  const rpc::MemoryLocation b_loc = PutStart("b", kSize);
  ASSERT_EQ(b_loc.segment_id(), a.segment_id());
  ASSERT_EQ(b_loc.offset(), a.offset());  // A's range
  EXPECT_GT(Generation(b_loc), Generation(a));
  const std::string b = RandomBytes(kSize, 23);
  ASSERT_EQ(RawWrite(b_loc, b), ErrorCode::OK);

  EXPECT_EQ(RawWrite(a, std::string(kSize, 'X')), ErrorCode::INVALID_WRITE);
  PutEnd("b");
  EXPECT_EQ(client_->Get("b").value(), b);
}

INSTANTIATE_TEST_SUITE_P(DramDirectory, StaleWriteTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "On" : "Off";
                         });

// Old-peer degradation: a master that signs nothing (an older one, or
// --data_capabilities=false) gives the node no key, and the node serves
// unchecked instead of refusing every client.
TEST(CapabilityDegradationTest, AMasterThatSignsNothingLeavesNodesUnchecked) {
  LocalClusterOptions o;
  o.num_nodes = 1;
  o.data_capabilities = false;
  LocalCluster cluster(o);
  ASSERT_TRUE(cluster.Start().ok());
  ClientConfig c;
  c.transport = TransportMode::kTcp;
  auto client = cluster.NewClient(c).value();
  const std::string v = RandomBytes(8192, 9);
  ASSERT_TRUE(client->Put("k", v).ok());
  EXPECT_EQ(client->Get("k").value(), v);
  MasterClient m(cluster.master_address(), 5000);
  rpc::KeyRequest req;
  req.set_tenant("default");
  req.set_key("k");
  rpc::GetReplicaListResponse resp;
  ASSERT_TRUE(
      m.Call(&rpc::MasterService::Stub::GetReplicaList, req, &resp).ok());
  ASSERT_EQ(resp.replicas_size(), 1);
  EXPECT_TRUE(resp.replicas(0).memory().capability().empty());
  // And a raw read without a token is served: nothing is checked.
  Node& node = cluster.node(0);
  const auto& loc = resp.replicas(0).memory();
  std::vector<uint8_t> got(loc.length());
  std::vector<ReadOp> ops = {
      {loc.segment_id(), loc.offset(), loc.length(), got.data()}};
  TcpDataClient raw;
  ASSERT_TRUE(raw.Read(node.data_endpoint(), node.node_id(), ops).ok());
  EXPECT_EQ(ops[0].result, ErrorCode::OK);
}

}  // namespace
}  // namespace kvpool
