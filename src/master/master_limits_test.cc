// Bounded resources (issue #16): the limits on key length, tenant name
// length and number of tenants, and the reclaim of a tenant once it holds
// nothing; plus the batch promotion RPCs' per-item refusals.
#include <fmt/format.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "common/auth.h"
#include "common/failpoint.h"
#include "master/master_grpc_service.h"
#include "master/master_service.h"

namespace kvpool {
namespace {

constexpr uint64_t kSeg = 16 << 20;

// Resident set of this process, in KiB.
long RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.default_kv_lease_ttl = 1000;
    config_.client_ttl = 2;
    config_.holder_ack_timeout_ms = 0;
    config_.enable_prefetch_trigger = true;
    Restart();
  }
  void Restart() { svc_ = std::make_unique<MasterService>(config_, &clock_); }
  uint32_t Mount(const std::string& node, bool remount = false,
                 bool ssd = false, bool directory = true) {
    SegmentInfo info;
    info.node_id = node;
    info.capacity = kSeg;
    info.data_endpoint = node + ":1";
    auto r = svc_->MountSegment(info, ssd, false, remount, directory);
    EXPECT_TRUE(r.ok());
    return r.value();
  }
  Status Put(const std::string& tenant, const std::string& key,
             uint64_t size = 100, PutOptions o = {}) {
    auto r = svc_->PutStart(tenant, key, size, o);
    if (!r.ok()) return r.status();
    return svc_->PutEnd(tenant, key);
  }
  // One heartbeat of `node` acknowledging everything it was sent before.
  void Beat(const std::string& node) {
    NodeTasks t;
    EXPECT_TRUE(svc_->Heartbeat(node, 0, 0, &t, acked_[node]).ok());
    for (const auto& e : t.dram_events) {
      acked_[node] = e.seq;
      if (e.disk_drop) continue;
      if (e.placed) {
        dir_[node][e.offset] =
            MemoryObjectIn{e.tenant, e.key, e.offset, e.size, e.version};
      } else {
        dir_[node].erase(e.offset);
      }
    }
  }
  std::vector<MemoryObjectIn> Directory(const std::string& node) {
    std::vector<MemoryObjectIn> out;
    for (const auto& [off, o] : dir_[node]) out.push_back(o);
    return out;
  }
  void Run(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 100) {
      clock_.Advance(std::min<int64_t>(100, ms - t));
      svc_->Housekeep();
    }
  }
  // Time passes while `beating` nodes heartbeat and the others fall silent
  // (past client_ttl: declared dead).
  void RunBeating(int64_t ms, const std::vector<std::string>& beating) {
    for (int64_t t = 0; t < ms; t += 100) {
      Run(std::min<int64_t>(100, ms - t));
      for (const auto& n : beating) Beat(n);
    }
  }
  void DeclareOthersDead(const std::string& survivor) {
    RunBeating(3000, {survivor});
  }
  double TenantsGauge() {
    const std::string text = svc_->metrics().RenderPrometheus();
    const std::string series = "\nkvpool_master_tenants ";
    auto at = text.find(series);
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + series.size()));
  }

  MasterConfig config_;
  FakeClock clock_;
  std::unique_ptr<MasterService> svc_;
  std::map<std::string, uint64_t> acked_;
  std::map<std::string, std::map<uint64_t, MemoryObjectIn>> dir_;
};

TEST_F(LimitsTest, DefaultsMatchTheDataPlaneAndAreValidated) {
  MasterConfig c;
  EXPECT_EQ(c.max_key_bytes, 4096);
  EXPECT_EQ(c.max_tenant_name_bytes, 256);
  EXPECT_EQ(c.max_tenants, 4096);
  EXPECT_TRUE(c.Validate().ok());
  c.max_key_bytes = 4097;  // the data plane could not carry it
  EXPECT_EQ(c.Validate().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(c.Validate().message().find("max_key_bytes"), std::string::npos);
  c.max_key_bytes = 0;
  EXPECT_FALSE(c.Validate().ok());
  c = MasterConfig();
  c.max_tenant_name_bytes = 0;
  EXPECT_NE(c.Validate().message().find("max_tenant_name_bytes"),
            std::string::npos);
  c = MasterConfig();
  c.max_tenants = -1;
  EXPECT_NE(c.Validate().message().find("max_tenants"), std::string::npos);
  EXPECT_NE(MasterConfig().ToString().find("max_tenants=4096"),
            std::string::npos);
  c = MasterConfig();
  EXPECT_EQ(c.version_floor_slots, int64_t{1} << 20);
  c.version_floor_slots = 0;
  EXPECT_NE(c.Validate().message().find("version_floor_slots"),
            std::string::npos);
  c.version_floor_slots = (int64_t{1} << 30) + 1;
  EXPECT_FALSE(c.Validate().ok());
  EXPECT_NE(MasterConfig().ToString().find("version_floor_slots=1048576"),
            std::string::npos);
}

// Every request that names a tenant or a key: an over-long one is refused
// per item with a clear code, and nothing in the store changes.
TEST_F(LimitsTest, OverLongKeysAndTenantsAreRefusedByEveryRequest) {
  const uint32_t seg = Mount("a", false, /*ssd=*/true);
  ASSERT_TRUE(Put("", "k").ok());
  ASSERT_TRUE(Put("t", "k").ok());
  // At the limits exactly: accepted.
  const std::string max_key(4096, 'k'), max_tenant(256, 't');
  ASSERT_TRUE(Put(max_tenant, max_key).ok());
  EXPECT_TRUE(svc_->GetReplicaList(max_tenant, max_key).ok());

  const MasterStats before = svc_->Stats();
  const uint64_t used = svc_->segments().Usage(SegmentKind::kMain).used;
  const size_t tenants = svc_->tenant_count();
  ASSERT_EQ(tenants, 2u);

  const std::string long_key(4097, 'k');
  const std::string huge_tenant(1 << 20, 'T');
  using V = std::vector<ErrorCode>;
  for (const std::string& long_tenant : {std::string(257, 't'), huge_tenant}) {
    SCOPED_TRACE(long_tenant.size());
    // (tenant, key, the code for a request naming them)
    const std::vector<std::tuple<std::string, std::string, ErrorCode>> bad = {
        {long_tenant, "k", ErrorCode::INVALID_PARAMS},
        {"", long_key, ErrorCode::INVALID_KEY},
        {"t", long_key, ErrorCode::INVALID_KEY},
        {long_tenant, long_key, ErrorCode::INVALID_PARAMS},
    };
    for (const auto& [tenant, key, code] : bad) {
      SCOPED_TRACE(key.size());
      PutOptions upsert;
      upsert.upsert = true;
      EXPECT_EQ(svc_->PutStart(tenant, key, 100, {}).code(), code);
      EXPECT_EQ(svc_->PutStart(tenant, key, 100, upsert).code(), code);
      EXPECT_EQ(svc_->PutEnd(tenant, key).code(), code);
      EXPECT_EQ(svc_->BatchPutEnd(tenant, {key, "k"})[0].code(), code);
      EXPECT_EQ(svc_->PutRevoke(tenant, key).code(), code);
      EXPECT_EQ(svc_->GetReplicaList(tenant, key).code(), code);
      EXPECT_EQ(svc_->ExistKey(tenant, key, true), code);
      EXPECT_EQ(svc_->ExistKey(tenant, key, false), code);
      EXPECT_EQ(svc_->QueryReadOnly(tenant, key).code, code);
      BatchQueryResult q;
      svc_->QueryReadOnlyBatch(tenant, std::vector<std::string>{key, key}, &q);
      ASSERT_EQ(q.items.size(), 2u);
      EXPECT_EQ(q.items[1].code, code);
      EXPECT_EQ(svc_->Remove(tenant, key, true).code(), code);
      EXPECT_EQ(svc_->PromotionAllocStart("a", tenant, key, 100, 1).code(),
                code);
      EXPECT_EQ(svc_->NotifyPromotion("a", tenant, key, 1, true).code(), code);
      EXPECT_EQ(svc_->RegisterPrefetchTask("a", tenant, {key})[0].code, code);
      // Node messages carry per-item codes the node acts on: any refusal
      // means "drop (or keep) your copy"; INVALID_PARAMS as for other
      // malformed items.
      EXPECT_EQ(svc_->NotifyOffload("a", {{tenant, key, 1, ErrorCode::OK}}),
                V{ErrorCode::INVALID_PARAMS});
      EXPECT_EQ(svc_->RegisterDiskObjects("a", {{tenant, key, 100, 1}}),
                V{ErrorCode::INVALID_PARAMS});
      EXPECT_EQ(svc_->RemoveDiskReplicas("a", {{tenant, key, 100, 1}}),
                V{ErrorCode::INVALID_PARAMS});
      auto mem = svc_->RegisterMemoryObjects(
          "a", seg, {{tenant, key, kSeg - 4096, 100, 1}}, false);
      ASSERT_TRUE(mem.ok());
      EXPECT_EQ(mem.value(), V{ErrorCode::INVALID_PARAMS});
    }
    EXPECT_EQ(svc_->RemoveAll(long_tenant, true).code(),
              ErrorCode::INVALID_PARAMS);
    EXPECT_EQ(svc_->RemoveByRegex(long_tenant, ".*", true).code(),
              ErrorCode::INVALID_PARAMS);
    EXPECT_EQ(svc_->BatchPrefetchToMemory(long_tenant, {"k"}).code(),
              ErrorCode::INVALID_PARAMS);
    // A key over the limit was never stored: the RFC's NOT_FOUND.
    auto pf = svc_->BatchPrefetchToMemory("", {long_key, "k"});
    ASSERT_TRUE(pf.ok());
    EXPECT_EQ(pf.value()[0], MasterService::PrefetchStatus::kNotFound);
    EXPECT_EQ(pf.value()[1], MasterService::PrefetchStatus::kInMemory);
  }

  const MasterStats after = svc_->Stats();
  EXPECT_EQ(after.objects, before.objects);
  EXPECT_EQ(after.memory_replicas, before.memory_replicas);
  EXPECT_EQ(after.disk_replicas, 0u);
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, used);
  EXPECT_EQ(svc_->tenant_count(), tenants);
  EXPECT_EQ(svc_->promotion_counters().admitted, 0u);
  for (const auto& [t, k] : std::vector<std::pair<std::string, std::string>>{
           {"", "k"}, {"t", "k"}, {max_tenant, max_key}}) {
    EXPECT_TRUE(svc_->GetReplicaList(t, k).ok());
  }
  // The gRPC face answers remove_all with the code too (it had none).
  MasterGrpcService grpc_svc(svc_.get());
  grpc::ServerContext ctx;
  rpc::RemoveAllRequest req;
  req.set_tenant(std::string(257, 't'));
  rpc::RemoveAllResponse resp;
  ASSERT_TRUE(grpc_svc.RemoveAll(&ctx, &req, &resp).ok());
  EXPECT_EQ(resp.error_code(), ToInt(ErrorCode::INVALID_PARAMS));
  EXPECT_EQ(resp.removed(), 0u);
}

TEST_F(LimitsTest, ThePutThatWouldCreateOneTenantTooManyIsRefused) {
  config_.max_tenants = 3;
  Restart();
  Mount("a", false, /*ssd=*/true);
  for (const char* t : {"t1", "t2", "t3"}) ASSERT_TRUE(Put(t, "k").ok());
  EXPECT_EQ(svc_->tenant_count(), 3u);
  const uint64_t used = svc_->segments().Usage(SegmentKind::kMain).used;
  auto r = svc_->PutStart("t4", "k", 100, {});
  EXPECT_EQ(r.code(), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_NE(r.status().message().find("max_tenants (3)"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(svc_->segments().Usage(SegmentKind::kMain).used, used);
  EXPECT_EQ(svc_->tenant_count(), 3u);
  EXPECT_EQ(svc_->metrics().CounterValue(
                "kvpool_master_tenant_limit_refusals_total", ""),
            1u);
  // Known tenants and the default one (outside the count) still take puts.
  EXPECT_TRUE(Put("t1", "k2").ok());
  EXPECT_TRUE(Put("", "k").ok());
  EXPECT_TRUE(Put("default", "k2").ok());
  // A node's copy of a fifth tenant is refused as well, item by item.
  using V = std::vector<ErrorCode>;
  EXPECT_EQ(svc_->RegisterDiskObjects(
                "a", {{"t5", "x", 100, 1}, {"t2", "x", 100, 1}}),
            (V{ErrorCode::NO_AVAILABLE_HANDLE, ErrorCode::OK}));
  EXPECT_EQ(svc_->tenant_count(), 3u);
  // Once a tenant is empty it no longer counts.
  ASSERT_TRUE(svc_->Remove("t3", "k", true).ok());
  EXPECT_EQ(svc_->tenant_count(), 2u);
  EXPECT_TRUE(Put("t4", "k").ok());
  EXPECT_EQ(svc_->tenant_count(), 3u);
  EXPECT_EQ(svc_->PutStart("t3", "k", 100, {}).code(),
            ErrorCode::NO_AVAILABLE_HANDLE);
}

TEST_F(LimitsTest, LookupsOfUnknownTenantsCreateNothing) {
  const uint32_t seg = Mount("a", false, /*ssd=*/true);
  PutOptions pinned;
  pinned.hard_pin = true;  // so a put that finds no room cannot evict it
  ASSERT_TRUE(Put("known", "k", 100, pinned).ok());
  ASSERT_EQ(svc_->tenant_count(), 1u);
  const uint64_t taken = svc_->QueryReadOnly("known", "k").replicas[0].offset;
  std::mt19937_64 rng(16);
  auto random_tenant = [&] { return fmt::format("{:016x}", rng()); };
  const long rss0 = RssKiB();
  constexpr int kLookups = 1000000;
  for (int i = 0; i < kLookups; ++i) {
    ASSERT_EQ(svc_->ExistKey(random_tenant(), "k", true),
              ErrorCode::OBJECT_NOT_FOUND);
  }
  const long rss1 = RssKiB();
  std::printf("[ RSS      ] %d ExistKey of unknown tenants: %ld -> %ld KiB\n",
              kLookups, rss0, rss1);
  EXPECT_EQ(svc_->tenant_count(), 1u);
  EXPECT_GE(svc_->metrics().CounterValue("kvpool_master_exists_total",
                                         "result=\"OBJECT_NOT_FOUND\""),
            uint64_t(kLookups));
  // Every other request that does not store anything.
  for (int i = 0; i < 100; ++i) {
    const std::string t = random_tenant();
    EXPECT_EQ(svc_->GetReplicaList(t, "k").code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->QueryReadOnly(t, "k").code, ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->Remove(t, "k", true).code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->RemoveAll(t, true).value(), 0u);  // once created it
    EXPECT_EQ(svc_->RemoveByRegex(t, "k.*", true).value(), 0u);
    EXPECT_EQ(svc_->PutEnd(t, "k").code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->PutRevoke(t, "k").code(), ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->PromotionAllocStart("a", t, "k", 100, 1).code(),
              ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->NotifyPromotion("a", t, "k", 1, true).code(),
              ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->RegisterPrefetchTask("a", t, {"k"})[0].code,
              ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->BatchPrefetchToMemory(t, {"k"}).value()[0],
              MasterService::PrefetchStatus::kNotFound);
    EXPECT_EQ(svc_->NotifyOffload("a", {{t, "k", 1, ErrorCode::OK}})[0],
              ErrorCode::OBJECT_NOT_FOUND);
    EXPECT_EQ(svc_->RemoveDiskReplicas("a", {{t, "k", 100, 1}})[0],
              ErrorCode::OK);
    // A put or a re-registration refused after the tenant was pinned for
    // it leaves no tenant behind.
    EXPECT_EQ(svc_->PutStart(t, "k", kSeg, {}).code(),
              ErrorCode::NO_AVAILABLE_HANDLE);
    EXPECT_EQ(svc_->RegisterDiskObjects("a", {{t, "k", 100, 1}})[0],
              ErrorCode::OBJECT_NOT_FOUND);  // removed above: the floor
    // Newer than any floor (which a tenant sharing t's slot may have
    // raised), so it is refused for its range only.
    const uint64_t newer =
        uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count()) +
        uint64_t{3600} * 1000 * 1000;
    EXPECT_EQ(svc_->RegisterMemoryObjects("a", seg,
                                          {{t, "j", taken, 100, newer}}, false)
                  .value()[0],
              ErrorCode::INVALID_PARAMS);  // the range holds known/k
  }
  EXPECT_EQ(svc_->tenant_count(), 1u);
  EXPECT_EQ(TenantsGauge(), 1.0);
  EXPECT_EQ(svc_->Stats().objects, 1u);
}

// Whatever takes a tenant's last object away, its name goes with it.
TEST_F(LimitsTest, AnEmptiedTenantIsReclaimed) {
  config_.put_start_release_timeout_sec = 30;
  Restart();
  Mount("a", false, /*ssd=*/true);
  Mount("b");
  auto gone = [&](const std::string& t) {
    return svc_->tenant_count() == 0 && svc_->tenants().Lookup(t) < 0;
  };
  EXPECT_EQ(TenantsGauge(), 0.0);
  // Removed, one key after the other.
  ASSERT_TRUE(Put("rm", "k1").ok());
  ASSERT_TRUE(Put("rm", "k2").ok());
  EXPECT_EQ(svc_->tenant_count(), 1u);
  EXPECT_EQ(TenantsGauge(), 1.0);
  ASSERT_TRUE(svc_->Remove("rm", "k1", false).ok());
  EXPECT_EQ(svc_->tenant_count(), 1u);
  ASSERT_TRUE(svc_->Remove("rm", "k2", false).ok());
  EXPECT_TRUE(gone("rm"));
  EXPECT_EQ(TenantsGauge(), 0.0);
  // remove_all, and a regex that matches the last keys.
  for (const char* k : {"a", "b", "c"}) ASSERT_TRUE(Put("all", k).ok());
  EXPECT_EQ(svc_->RemoveAll("all", false).value(), 3u);
  EXPECT_TRUE(gone("all"));
  for (const char* k : {"a", "b"}) ASSERT_TRUE(Put("re", k).ok());
  EXPECT_EQ(svc_->RemoveByRegex("re", "a", false).value(), 1u);
  EXPECT_EQ(svc_->tenant_count(), 1u);
  EXPECT_EQ(svc_->RemoveByRegex("re", "[a-z]", false).value(), 1u);
  EXPECT_TRUE(gone("re"));
  // Revoked, and abandoned (reclaimed by housekeeping).
  ASSERT_TRUE(svc_->PutStart("rv", "k", 100, {}).ok());
  EXPECT_EQ(svc_->tenant_count(), 1u);
  ASSERT_TRUE(svc_->PutRevoke("rv", "k").ok());
  EXPECT_TRUE(gone("rv"));
  ASSERT_TRUE(svc_->PutStart("ab", "k", 100, {}).ok());
  RunBeating(31000, {"a", "b"});
  EXPECT_TRUE(gone("ab"));
  // An upsert outliving the value it was to replace keeps the tenant.
  ASSERT_TRUE(Put("up", "k").ok());
  PutOptions up;
  up.upsert = true;
  ASSERT_TRUE(svc_->PutStart("up", "k", 200, up).ok());
  ASSERT_TRUE(svc_->Remove("up", "k", true).ok());
  EXPECT_EQ(svc_->tenant_count(), 1u);
  ASSERT_TRUE(svc_->PutEnd("up", "k").ok());
  EXPECT_EQ(svc_->GetReplicaList("up", "k")->size, 200u);
  ASSERT_TRUE(svc_->PutStart("up", "k", 300, up).ok());
  ASSERT_TRUE(svc_->PutEnd("up", "k").ok());  // replaces the old one
  EXPECT_EQ(svc_->tenant_count(), 1u);
  ASSERT_TRUE(svc_->PutStart("up", "k", 400, up).ok());
  ASSERT_TRUE(svc_->Remove("up", "k", true).ok());
  ASSERT_TRUE(svc_->PutRevoke("up", "k").ok());
  EXPECT_TRUE(gone("up"));
  // Evicted.
  ASSERT_TRUE(Put("ev", "k").ok());
  EXPECT_GT(svc_->EvictBytes(1), 0u);
  EXPECT_TRUE(gone("ev"));
  // Its SSD copy dropped by the holder (two-phase SSD eviction).
  using V = std::vector<ErrorCode>;
  ASSERT_EQ(svc_->RegisterDiskObjects("a", {{"ssd", "k", 100, 1}}),
            V{ErrorCode::OK});
  EXPECT_EQ(svc_->tenant_count(), 1u);
  EXPECT_EQ(svc_->RemoveDiskReplicas("a", {{"ssd", "k", 100, 1}}),
            V{ErrorCode::OK});
  EXPECT_TRUE(gone("ssd"));
  // Lost with its node.
  PutOptions on_b;
  on_b.preferred_node = "b";
  ASSERT_TRUE(Put("lost", "k", 100, on_b).ok());
  EXPECT_EQ(svc_->tenant_count(), 1u);
  DeclareOthersDead("a");
  EXPECT_TRUE(gone("lost"));
  // A reclaimed name is a new tenant like any other.
  ASSERT_TRUE(Put("rm", "k1").ok());
  EXPECT_EQ(svc_->tenant_count(), 1u);
  EXPECT_TRUE(svc_->GetReplicaList("rm", "k1").ok());
  EXPECT_EQ(svc_->GetReplicaList("rm", "k2").code(),
            ErrorCode::OBJECT_NOT_FOUND);
}

// The remove_all floor is not part of the tenant's entry: a node back from
// the dead cannot bring back what a remove_all removed, even once the
// tenant was emptied, forgotten and is created again by that very node.
TEST_F(LimitsTest, RemoveAllStillHoldsAfterTheTenantIsReclaimed) {
  const uint32_t seg_a = Mount("a");
  Mount("b");
  PutOptions on_a, on_b;
  on_a.preferred_node = "a";
  on_b.preferred_node = "b";
  ASSERT_TRUE(Put("t", "x", 100, on_a).ok());
  ASSERT_TRUE(Put("t", "z", 100, on_b).ok());
  Beat("a");
  Beat("b");
  ASSERT_EQ(Directory("a").size(), 1u);
  DeclareOthersDead("b");  // t/x is lost with a, which may come back
  ASSERT_EQ(svc_->GetReplicaList("t", "x").code(), ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_EQ(svc_->tenant_count(), 1u);
  EXPECT_EQ(svc_->RemoveAll("t", true).value(), 1u);  // takes t/z
  ASSERT_EQ(svc_->tenant_count(), 0u);                // t is forgotten
  // a comes back with t/x in its directory (and on its SSD).
  const uint32_t seg = Mount("a", /*remount=*/true);
  ASSERT_NE(seg, seg_a);
  auto codes = svc_->RegisterMemoryObjects("a", seg, Directory("a"), true);
  ASSERT_TRUE(codes.ok());
  EXPECT_EQ(codes.value(), std::vector<ErrorCode>{ErrorCode::OBJECT_NOT_FOUND});
  const uint64_t version = Directory("a")[0].version;
  Mount("c", false, /*ssd=*/true);
  EXPECT_EQ(svc_->RegisterDiskObjects("c", {{"t", "x", 100, version}}),
            std::vector<ErrorCode>{ErrorCode::OBJECT_NOT_FOUND});
  EXPECT_EQ(svc_->GetReplicaList("t", "x").code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->tenant_count(), 0u);
  // A remove_all of a tenant the master does not know holds the same way,
  // and creates no tenant.
  EXPECT_EQ(svc_->RemoveAll("never-seen", true).value(), 0u);
  EXPECT_EQ(svc_->tenant_count(), 0u);
  EXPECT_EQ(svc_->RegisterDiskObjects("c", {{"never-seen", "y", 100, version}}),
            std::vector<ErrorCode>{ErrorCode::OBJECT_NOT_FOUND});
  // Newer values of the tenant are taken as usual.
  constexpr uint64_t kHourUs = uint64_t{3600} * 1000 * 1000;
  EXPECT_EQ(
      svc_->RegisterDiskObjects("c", {{"t", "new", 100, version + kHourUs}}),
      std::vector<ErrorCode>{ErrorCode::OK});
  EXPECT_EQ(svc_->tenant_count(), 1u);
}

// The per-key floor and the lost versions are keyed by the tenant's name
// too, so neither is lost with a reclaimed tenant's id.
TEST_F(LimitsTest, KeyFloorsAndLostVersionsOutliveTheTenantsId) {
  Restart();
  const uint32_t a = Mount("a", true), b = Mount("b", true);
  using V = std::vector<ErrorCode>;
  // A removed key of a tenant the master forgets meanwhile.
  ASSERT_EQ(svc_->RegisterMemoryObjects("a", a, {{"t", "x", 0, 100, 5}}, false)
                .value(),
            V{ErrorCode::OK});
  ASSERT_TRUE(svc_->Remove("t", "x", true).ok());
  ASSERT_EQ(svc_->tenant_count(), 0u);
  EXPECT_EQ(svc_->RegisterMemoryObjects("b", b, {{"t", "x", 0, 100, 5}}, false)
                .value(),
            V{ErrorCode::OBJECT_NOT_FOUND});
  // A remove of a tenant the master never knew (it just restarted).
  EXPECT_EQ(svc_->Remove("u", "y", true).code(), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(svc_->tenant_count(), 0u);
  EXPECT_EQ(
      svc_->RegisterMemoryObjects("b", b, {{"u", "y", 4096, 100, 6}}, false)
          .value(),
      V{ErrorCode::OBJECT_NOT_FOUND});
  // b holds the newer value of t/k and dies with it; t is forgotten; a's
  // older copy must not become t/k's value when it re-creates t.
  ASSERT_EQ(
      svc_->RegisterMemoryObjects("b", b, {{"t", "k", 8192, 100, 9}}, true)
          .value(),
      V{ErrorCode::OK});
  ASSERT_EQ(svc_->tenant_count(), 1u);
  DeclareOthersDead("a");
  ASSERT_EQ(svc_->tenant_count(), 0u);
  EXPECT_EQ(
      svc_->RegisterMemoryObjects("a", a, {{"t", "k", 8192, 100, 7}}, true)
          .value(),
      V{ErrorCode::OBJECT_ALREADY_EXISTS});
  EXPECT_EQ(svc_->tenant_count(), 0u);
}

// Puts, upserts, removes and lookups racing on a few tenants: every
// tenant's count stays exact, so emptying the store forgets them all.
TEST_F(LimitsTest, RacingRequestsLeaveNoTenantBehind) {
  Mount("a");
  constexpr int kThreads = 4, kOps = 3000;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int i = 0; i < kOps; ++i) {
        const std::string t = fmt::format("t{}", rng() % 4);
        const std::string k = fmt::format("k{}", rng() % 3);
        switch (rng() % 6) {
          case 0:
          case 1: {
            PutOptions o;
            o.upsert = rng() % 2;
            if (svc_->PutStart(t, k, 100, o).ok()) {
              if (rng() % 4 == 0) {
                svc_->PutRevoke(t, k).IgnoreError();
              } else {
                svc_->PutEnd(t, k).IgnoreError();
              }
            }
            break;
          }
          case 2:
            svc_->Remove(t, k, rng() % 2).IgnoreError();
            break;
          case 3:
            svc_->RemoveAll(t, true).status().IgnoreError();
            break;
          default:
            svc_->GetReplicaList(t, k).status().IgnoreError();
            svc_->ExistKey(t, k, false);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(svc_->tenant_count(), 4u);
  for (int t = 0; t < 4; ++t)
    EXPECT_TRUE(svc_->RemoveAll(fmt::format("t{}", t), true).ok());
  EXPECT_EQ(svc_->Stats().objects, 0u);
  EXPECT_EQ(svc_->tenant_count(), 0u);
}

// Not a limit but its measure: what 4096 tenants of 256-byte names cost
// the master, and that emptying them gives it back. Prints; asserts only
// the counts (RSS depends on the allocator).
TEST_F(LimitsTest, MemoryOfTenantsIsGivenBack) {
  // No DRAM directory: its event queue (which this test does not drain)
  // would hold every name too.
  Mount("a", false, false, /*directory=*/false);
  malloc_trim(0);
  const long rss0 = RssKiB();
  // The measure (100 tenants of 1 MiB names: +214 MiB before):
  // such names are refused now and cost nothing.
  const std::string huge(1 << 20, 'x');
  for (int i = 0; i < 100; ++i) {
    std::string t = huge;
    std::memcpy(t.data(), &i, sizeof(i));
    ASSERT_EQ(svc_->PutStart(t, "k", 64, {}).code(), ErrorCode::INVALID_PARAMS);
  }
  malloc_trim(0);
  const long rss_huge = RssKiB();
  EXPECT_EQ(svc_->tenant_count(), 0u);
  auto name = [](int i) {
    std::string t(256, 'n');
    const std::string id = std::to_string(i);
    t.replace(0, id.size(), id);
    return t;
  };
  constexpr int kTenants = 4096;
  for (int i = 0; i < kTenants; ++i) ASSERT_TRUE(Put(name(i), "k", 64).ok());
  const size_t full = svc_->tenant_count();
  const long rss_full = RssKiB();
  for (int i = 0; i < kTenants; ++i)
    ASSERT_TRUE(svc_->Remove(name(i), "k", true).ok());
  const size_t emptied = svc_->tenant_count();
  const long rss_emptied = RssKiB();
  malloc_trim(0);
  const long rss_trimmed = RssKiB();
  EXPECT_EQ(full, size_t(kTenants));
  EXPECT_EQ(emptied, 0u);
  EXPECT_EQ(svc_->PutStart("one-too-many", "k", 64, {}).code(),
            ErrorCode::OK);  // the count is back to 0
  std::printf(
      "[ RSS      ] start %ld KiB; after 100 refused 1 MiB tenant names %ld "
      "KiB\n"
      "[ RSS      ] %zu tenants of 256-byte names (one 64-byte object each): "
      "%ld KiB\n"
      "[ RSS      ] emptied, %zu tenants left: %ld KiB (%ld KiB after "
      "malloc_trim)\n",
      rss0, rss_huge, full, rss_full, emptied, rss_emptied, rss_trimmed);
  // Again with other names: what stays after the first round is the
  // tables' capacity, reused, not names kept.
  ASSERT_TRUE(svc_->PutRevoke("one-too-many", "k").ok());
  for (int round = 1; round <= 3; ++round) {
    for (int i = 0; i < kTenants; ++i)
      ASSERT_TRUE(Put(name(round * kTenants + i), "k", 64).ok());
    ASSERT_EQ(svc_->tenant_count(), size_t(kTenants));
    for (int i = 0; i < kTenants; ++i)
      ASSERT_TRUE(svc_->Remove(name(round * kTenants + i), "k", true).ok());
    ASSERT_EQ(svc_->tenant_count(), 0u);
    malloc_trim(0);
    std::printf(
        "[ RSS      ] round %d of 4096 new tenants created and emptied: "
        "%ld KiB\n",
        round + 1, RssKiB());
  }
}

// The batch promotion RPCs run each item through its own handler; an item
// that handler refuses (here: the credential went stale while an earlier
// item ran) is a failed item, not a success with an empty answer. The items
// are checked with the batch's token wherever it came: in the metadata, or
// in the batch request's auth_token (the items carry none).
class BatchItemAuthTest : public LimitsTest,
                          public ::testing::WithParamInterface<bool> {};

TEST_P(BatchItemAuthTest, ABatchItemItsHandlerRefusedIsReportedAsFailed) {
  const bool in_request = GetParam();
  Mount("a", false, /*ssd=*/true);
  auto secret = auth::ClusterSecret::Generate();
  auto cred = auth::MakeCredential(secret, auth::Role::kNode, "a");
  ASSERT_TRUE(cred.ok());
  constexpr int64_t kSkewMs = 2000;
  MasterGrpcService grpc_svc(svc_.get());
  grpc_svc.set_authorizer(
      std::make_unique<RpcAuthorizer>(secret, kSkewMs, &svc_->metrics()));
  // `invoke(ctx, token)` puts `token` into its request when it is not empty.
  auto call = [&](RpcMethod m, auto invoke) {
    grpc::ServerContext ctx;
    grpc::testing::ServerContextTestSpouse spouse(&ctx);
    // Fresh for the batch's check, stale once the first item has stalled.
    const std::string token =
        cred->Token(RpcMethodName(m), auth::UnixNowMs() - kSkewMs / 2);
    if (!in_request) spouse.AddClientMetadata(auth::kMetadataKey, token);
    ASSERT_TRUE(
        ArmFailpoints("master.promotion_call.before=pause:1500@1").ok());
    invoke(&ctx, in_request ? token : std::string());
    DisarmFailpoints();
  };
  call(RpcMethod::kBatchPromotionAllocStart, [&](grpc::ServerContext* ctx,
                                                 const std::string& token) {
    rpc::BatchPromotionAllocStartRequest req;
    req.set_auth_token(token);
    for (int i = 0; i < 2; ++i) {
      auto* item = req.add_items();
      item->set_node_id("a");
      item->set_key("k");
      item->set_size(100);
      item->set_task_id(1);
    }
    rpc::BatchPromotionAllocStartResponse resp;
    ASSERT_TRUE(grpc_svc.BatchPromotionAllocStart(ctx, &req, &resp).ok());
    ASSERT_EQ(resp.items_size(), 2);
    EXPECT_EQ(resp.items(0).error_code(), ToInt(ErrorCode::OBJECT_NOT_FOUND));
    EXPECT_EQ(resp.items(1).error_code(), ToInt(ErrorCode::ILLEGAL_CLIENT));
    EXPECT_FALSE(resp.items(1).has_replica());
  });
  call(RpcMethod::kBatchPromotionNotify,
       [&](grpc::ServerContext* ctx, const std::string& token) {
         rpc::BatchPromotionNotifyRequest req;
         req.set_auth_token(token);
         for (int i = 0; i < 2; ++i) {
           auto* item = req.add_items();
           item->set_node_id("a");
           item->set_key("k");
           item->set_task_id(1);
           item->set_success(true);
         }
         rpc::BatchPromotionNotifyResponse resp;
         ASSERT_TRUE(grpc_svc.BatchPromotionNotify(ctx, &req, &resp).ok());
         ASSERT_EQ(resp.error_codes_size(), 2);
         EXPECT_EQ(resp.error_codes(0), ToInt(ErrorCode::OBJECT_NOT_FOUND));
         EXPECT_EQ(resp.error_codes(1), ToInt(ErrorCode::ILLEGAL_CLIENT));
       });
}

INSTANTIATE_TEST_SUITE_P(TokenCarrier, BatchItemAuthTest,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "InRequest" : "InMetadata";
                         });

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

TEST(SegmentNameLimitsTest, OverLongNodeNamesAreRefusedAtMount) {
  MasterConfig config;
  FakeClock clock;
  MasterService svc(config, &clock);
  SegmentInfo info;
  info.capacity = 1 << 20;
  info.node_id = std::string(257, 'n');
  EXPECT_EQ(svc.MountSegment(info).code(), ErrorCode::INVALID_PARAMS);
  info.node_id = std::string(256, 'n');
  info.data_endpoint = std::string(513, 'e');
  EXPECT_EQ(svc.MountSegment(info).code(), ErrorCode::INVALID_PARAMS);
  info.data_endpoint = "n:1";
  EXPECT_TRUE(svc.MountSegment(info).ok());
  EXPECT_EQ(svc.Stats().segments.size(), 1u);
}

}  // namespace
}  // namespace kvpool
