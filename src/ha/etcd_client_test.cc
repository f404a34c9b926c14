#include "ha/etcd_client.h"

#include <gtest/gtest.h>

#include "ha/etcd_test_process.h"

namespace kvpool::ha {
namespace {

namespace fs = std::filesystem;

TEST(EtcdEndpointsTest, AcceptsMooncakeAndUrlFormsAndRefusesTheRest) {
  auto a = ParseEndpoints("10.0.0.1:2379;10.0.0.2:2379");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value(),
            (std::vector<std::string>{"10.0.0.1:2379", "10.0.0.2:2379"}));
  auto b = ParseEndpoints("http://h1:2379/, http://h2:2379");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), (std::vector<std::string>{"h1:2379", "h2:2379"}));
  EXPECT_EQ(ParseEndpoints("").status().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEndpoints(" ; ").status().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEndpoints("h1").status().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ParseEndpoints("h1:x").status().code(), ErrorCode::INVALID_PARAMS);
  auto https = ParseEndpoints("https://h1:2379");
  EXPECT_EQ(https.status().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(https.status().message().find("https"), std::string::npos);
}

class EtcdClientTest : public ::testing::Test {
 protected:
  EtcdClientTest()
      : dir_(fs::temp_directory_path() /
             ("kvpool-etcd-client-" + std::to_string(getpid()))),
        etcd_(dir_) {}
  ~EtcdClientTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  testing::EtcdProcess etcd_;
};

TEST_F(EtcdClientTest, CreateIfAbsentLetsOneCallerWin) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  EtcdClient c({etcd_.endpoint()}, 2000);
  auto lease = c.GrantLease(5);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_GE(lease.value().ttl_s, 5);

  auto first = c.CreateIfAbsent("/k", "a:1", lease.value().id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first.value().created);
  EXPECT_GT(first.value().revision, 0);

  auto second = c.CreateIfAbsent("/k", "b:2", 0);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second.value().created);
  ASSERT_TRUE(second.value().existing.has_value());
  EXPECT_EQ(second.value().existing->value, "a:1");
  EXPECT_EQ(second.value().existing->create_revision, first.value().revision);
  EXPECT_EQ(second.value().existing->lease, lease.value().id);

  // Binary-safe values (base64 on the wire).
  const std::string odd("\0\xff=\n", 4);
  ASSERT_TRUE(c.Put("/bin", odd).ok());
  auto got = c.Get("/bin");
  ASSERT_TRUE(got.ok() && got.value().has_value());
  EXPECT_EQ(got.value()->value, odd);
  ASSERT_TRUE(c.Delete("/bin").ok());
  auto gone = c.Get("/bin");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone.value().has_value());
}

TEST_F(EtcdClientTest, RevokingALeaseDeletesItsKeyAndEndsKeepAlives) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  EtcdClient c({etcd_.endpoint()}, 2000);
  auto lease = c.GrantLease(5);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(c.CreateIfAbsent("/leader", "x", lease.value().id).ok());
  auto ttl = c.KeepAlive(lease.value().id);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_GE(ttl.value(), 5);
  ASSERT_TRUE(c.Revoke(lease.value().id).ok());
  auto gone = c.Get("/leader");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone.value().has_value());
  EXPECT_EQ(c.KeepAlive(lease.value().id).status().code(),
            ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(EtcdClientTest, ADeadEndpointIsSkippedAndAllDeadIsAClearError) {
  ASSERT_FALSE(etcd_.endpoint().empty()) << "etcd did not start";
  const std::string dead =
      "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  EtcdClient c({dead, etcd_.endpoint()}, 1000);
  ASSERT_TRUE(c.Put("/a", "1").ok());
  auto got = c.Get("/a");
  ASSERT_TRUE(got.ok() && got.value().has_value());
  EXPECT_EQ(got.value()->value, "1");

  EtcdClient none({dead}, 300);
  auto s = none.Get("/a");
  EXPECT_EQ(s.status().code(), ErrorCode::RPC_FAIL);
  EXPECT_NE(s.status().message().find(dead), std::string::npos)
      << s.status().ToString();
}

}  // namespace
}  // namespace kvpool::ha
