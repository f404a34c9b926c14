// The pieces of the Mooncake-compatible store that need no cluster: the
// local buffer's allocator and the translation of Mooncake's configs.
#include <gtest/gtest.h>

#include <cstring>

#include "capi/compat_config.h"
#include "capi/local_buffer.h"

namespace kvpool::compat {
namespace {

TEST(LocalBufferTest, AllocatesUntilFullAndCoalescesOnFree) {
  auto lb = LocalBuffer::Create(4096).value();
  auto a = lb->Allocate(1000);  // 1024 with alignment
  auto b = lb->Allocate(1024);
  auto c = lb->Allocate(2048);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->size(), 1000u);
  EXPECT_EQ(lb->free_bytes(), 0u);
  EXPECT_EQ(lb->Allocate(1), nullptr);
  EXPECT_EQ(b->data(), a->data() + 1024);
  b.reset();
  a.reset();  // coalesces with b's range: 2048 contiguous bytes
  auto d = lb->Allocate(2048);
  ASSERT_TRUE(d);
  EXPECT_EQ(lb->Allocate(1), nullptr);
  c.reset();
  d.reset();
  EXPECT_EQ(lb->free_bytes(), 4096u);
  EXPECT_TRUE(lb->Allocate(4096));
}

TEST(LocalBufferTest, HandleKeepsTheMappingAlive) {
  std::shared_ptr<BufferHandle> h;
  {
    auto lb = LocalBuffer::Create(1 << 20).value();
    h = lb->Allocate(16);
  }
  std::memset(h->data(), 7, 16);  // faults if the buffer were unmapped
  EXPECT_EQ(h->data()[15], 7);
  h->Truncate(4);
  EXPECT_EQ(h->size(), 4u);
  EXPECT_FALSE(LocalBuffer::Create(0).ok());
}

TEST(CompatConfigTest, SoftPinActionsAndTtl) {
  MooncakeReplicateConfig rc;
  EXPECT_FALSE(ToReplicateConfig(rc)->with_soft_pin);
  rc.with_soft_pin = true;
  EXPECT_TRUE(ToReplicateConfig(rc)->with_soft_pin);  // PRESERVE
  rc.soft_pin_action = SoftPinAction::kDisable;
  EXPECT_FALSE(ToReplicateConfig(rc)->with_soft_pin);
  rc.with_soft_pin = false;
  rc.soft_pin_action = SoftPinAction::kEnable;
  EXPECT_TRUE(ToReplicateConfig(rc)->with_soft_pin);
  rc.soft_pin_ttl_ms = 250;
  EXPECT_EQ(ToReplicateConfig(rc)->soft_pin_ttl_ms, 250);
  rc.soft_pin_ttl_ms = 0;  // Mooncake: a zero TTL registers no soft pin
  EXPECT_FALSE(ToReplicateConfig(rc)->with_soft_pin);
  // A TTL without a soft pin is a mistake (Mooncake: INVALID_PARAMS).
  rc.soft_pin_ttl_ms = 250;
  rc.soft_pin_action = SoftPinAction::kDisable;
  EXPECT_EQ(ToReplicateConfig(rc).code(), ErrorCode::INVALID_PARAMS);
  rc.soft_pin_action = SoftPinAction::kPreserve;
  EXPECT_EQ(ToReplicateConfig(rc).code(), ErrorCode::INVALID_PARAMS);
  rc.with_soft_pin = true;
  EXPECT_EQ(ToReplicateConfig(rc)->soft_pin_ttl_ms, 250);
  rc.soft_pin_ttl_ms = ~uint64_t{0};  // clamped, never negative
  EXPECT_EQ(ToReplicateConfig(rc)->soft_pin_ttl_ms, INT64_MAX);
  rc.soft_pin_ttl_ms.reset();
  rc.replica_num = 0;
  EXPECT_EQ(ToReplicateConfig(rc).code(), ErrorCode::INVALID_PARAMS);
  rc.replica_num = 2;
  rc.preferred_segments = {"a:1", "b:2"};
  rc.with_hard_pin = true;
  auto out = ToReplicateConfig(rc).value();
  EXPECT_EQ(out.replica_num, 2);
  EXPECT_EQ(out.preferred_segments.size(), 2u);
  EXPECT_TRUE(out.with_hard_pin);
}

TEST(CompatConfigTest, SetupDictParsesMooncakeAndKvpoolKeys) {
  auto c = SetupConfigFromDict({{"local_hostname", "10.0.0.5:17000"},
                                {"metadata_server", "P2PHANDSHAKE"},
                                {"global_segment_size", "4GiB"},
                                {"local_buffer_size", "16777216"},
                                {"device_name", "mlx5_0"},
                                {"master_server_address", "m:50051"},
                                {"transport", "TCP"},
                                {"lease_cache", "True"},
                                {"some_future_key", "ignored"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->global_segment_size, 4ull << 30);
  EXPECT_EQ(c->local_buffer_size, 16ull << 20);
  EXPECT_EQ(c->rdma_devices, "mlx5_0");
  EXPECT_EQ(c->master_server_addr, "m:50051");
  EXPECT_EQ(c->transport, TransportMode::kTcp);
  EXPECT_TRUE(c->lease_cache);
  EXPECT_EQ(SetupConfigFromDict({{"global_segment_size", "1"}}).code(),
            ErrorCode::INVALID_PARAMS);  // no local_hostname
  EXPECT_EQ(
      SetupConfigFromDict({{"local_hostname", "h"}, {"lease_cache", "maybe"}})
          .code(),
      ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(SetupConfigFromDict(
                {{"local_hostname", "h"}, {"enable_ssd_offload", "1"}})
                .code(),
            ErrorCode::INVALID_PARAMS);  // needs ssd_offload_path
}

}  // namespace
TEST(CompatConfigTest, MooncakeSizes) {
  EXPECT_EQ(ParseMooncakeSize("16MB").value(), 16u << 20);
  EXPECT_EQ(ParseMooncakeSize("16 MB").value(), 16u << 20);
  EXPECT_EQ(ParseMooncakeSize(" 16 mb ").value(), 16u << 20);
  EXPECT_EQ(ParseMooncakeSize("4GiB").value(), 4ull << 30);
  EXPECT_EQ(ParseMooncakeSize("1.5 GB").value(), 3ull << 29);
  EXPECT_EQ(ParseMooncakeSize("2K").value(), 2048u);
  EXPECT_EQ(ParseMooncakeSize("1t").value(), 1ull << 40);
  EXPECT_EQ(ParseMooncakeSize("4096").value(), 4096u);
  EXPECT_EQ(ParseMooncakeSize("4096 B").value(), 4096u);
  for (const char* bad : {"50%", "", "MB", "-1", "1e3", "16 XB", "1..5G",
                          "99999999999999999999", "20000000T", "infinite"}) {
    EXPECT_EQ(ParseMooncakeSize(bad).code(), ErrorCode::INVALID_PARAMS) << bad;
  }
  auto c = SetupConfigFromDict(
      {{"local_hostname", "h"}, {"global_segment_size", "50%"}});
  EXPECT_EQ(c.code(), ErrorCode::INVALID_PARAMS);
  c = SetupConfigFromDict({{"local_hostname", "h"},
                           {"global_segment_size", "16 MB"},
                           {"tenant_id", "t1"}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->global_segment_size, 16u << 20);
  EXPECT_EQ(c->tenant, "t1");
}

}  // namespace kvpool::compat
