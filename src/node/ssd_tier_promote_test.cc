// SsdTier's promotion chain against a fake master on loopback gRPC: the
// order of its steps, what the master hears for every key, and the
// promotion queue's deadlines driven by a FakeClock (no sleeps).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/failpoint.h"
#include "node/ssd_tier.h"
#include "storage/aligned_buffer.h"
#include "storage/storage_test_util.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

constexpr uint64_t kSegmentId = 7;
constexpr uint64_t kSegmentSize = 1 << 20;
constexpr uint64_t kValue = 8192;

// Stages each promotion at the next 4096-aligned offset of one segment of
// the node's own, refuses the keys in `refuse`, and records every call.
class FakeMaster final : public rpc::MasterService::Service {
 public:
  bool batch_rpcs = true;  // false: an older master (UNIMPLEMENTED)
  std::vector<std::string> refuse;

  grpc::Status PromotionAllocStart(
      grpc::ServerContext*, const rpc::PromotionAllocStartRequest* req,
      rpc::PromotionAllocStartResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back("PromotionAllocStart");
    Stage(*req, resp);
    return grpc::Status::OK;
  }
  grpc::Status BatchPromotionAllocStart(
      grpc::ServerContext*, const rpc::BatchPromotionAllocStartRequest* req,
      rpc::BatchPromotionAllocStartResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back("BatchPromotionAllocStart");
    if (!batch_rpcs) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
    for (const auto& r : req->items()) Stage(r, resp->add_items());
    return grpc::Status::OK;
  }
  grpc::Status NotifyPromotion(grpc::ServerContext*,
                               const rpc::PromotionNotifyRequest* req,
                               rpc::KeyStatus*) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back("NotifyPromotion");
    notified_.push_back(*req);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  grpc::Status BatchPromotionNotify(
      grpc::ServerContext*, const rpc::BatchPromotionNotifyRequest* req,
      rpc::BatchPromotionNotifyResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back("BatchPromotionNotify");
    if (!batch_rpcs) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
    for (const auto& r : req->items()) notified_.push_back(r);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  // Blocks until at least `n` outcomes arrived (20 s at most).
  std::vector<rpc::PromotionNotifyRequest> WaitForNotified(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20),
                 [&] { return notified_.size() >= n; });
    return notified_;
  }
  std::vector<rpc::PromotionNotifyRequest> notified() {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // Where the key's replica was staged (its offset in the segment).
  uint64_t offset_of(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, off] : staged_)
      if (k == key) return off;
    ADD_FAILURE() << key << " was not staged";
    return 0;
  }

 private:
  void Stage(const rpc::PromotionAllocStartRequest& req,
             rpc::PromotionAllocStartResponse* resp) {
    for (const auto& k : refuse) {
      if (k == req.key()) {
        resp->set_error_code(int32_t(ErrorCode::NO_AVAILABLE_HANDLE));
        return;
      }
    }
    rpc::MemoryLocation* loc = resp->mutable_replica()->mutable_memory();
    loc->set_segment_id(kSegmentId);
    loc->set_offset(next_);
    loc->set_length(req.size());
    loc->set_node_id("node-1");
    staged_.emplace_back(req.key(), next_);
    next_ += (req.size() + 4095) / 4096 * 4096;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> calls_;
  std::vector<rpc::PromotionNotifyRequest> notified_;
  std::vector<std::pair<std::string, uint64_t>> staged_;
  uint64_t next_ = 0;
};

class SsdTierPromoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    master_ = std::make_unique<MasterClient>(
        "127.0.0.1:" + std::to_string(port), 5000);
    segments_.Add(kSegmentId, SegmentView{segment_.data(), kSegmentSize});
    config_.ssd_offload_path = dir_.path();
    config_.ssd_capacity_bytes = 64ull << 20;
    config_.ssd_segment_file_size = 8ull << 20;
    config_.ssd_io_backend = "pread";
  }
  void TearDown() override {
    if (tier_) tier_->Stop();
    tier_.reset();
    if (server_) server_->Shutdown();
  }

  void StartTier() {
    tier_ = std::make_unique<SsdTier>(config_, "node-1", master_.get(),
                                      &segments_, &tcp_, &clock_);
    tier_->SetPromotionWrittenHook([this](uint64_t, uint64_t offset, uint64_t,
                                          uint64_t version, const std::string&,
                                          const std::string& key, uint64_t) {
      std::lock_guard<std::mutex> lock(hook_mu_);
      written_.push_back({key, offset, version});
    });
    ASSERT_TRUE(tier_->Start().ok());
  }
  // Stores key "k<i>" (value Pattern(kValue, i), object version 100 + i).
  void Store(int i) {
    const auto v = storage::testing::Pattern(kValue, uint64_t(i));
    std::vector<WriteItem> items = {WriteItem{
        "", "k" + std::to_string(i), v.data(), v.size(), uint64_t(100 + i)}};
    ASSERT_TRUE(tier_->storage()->BatchWrite(items)[0].ok());
  }
  static rpc::PromotionTask Task(int i, uint64_t task_id = 0) {
    rpc::PromotionTask t;
    t.set_key("k" + std::to_string(i));
    t.set_size(kValue);
    t.set_task_id(task_id ? task_id : uint64_t(1000 + i));
    return t;
  }
  bool InSegment(int i) {
    const auto v = storage::testing::Pattern(kValue, uint64_t(i));
    const uint64_t off = fake_.offset_of("k" + std::to_string(i));
    return std::memcmp(segment_.data() + off, v.data(), kValue) == 0;
  }
  uint64_t Promoted(const char* result) {
    return tier_->metrics().CounterValue(
        "kvpool_node_promotion_total",
        std::string("result=\"") + result + "\"");
  }

  struct Written {
    std::string key;
    uint64_t offset, version;
  };
  FakeMaster fake_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MasterClient> master_;
  storage::AlignedBuffer segment_{kSegmentSize};
  SegmentTable segments_;
  TcpDataClient tcp_;
  FakeClock clock_;
  storage::testing::TempDir dir_;
  SsdTierConfig config_;
  std::unique_ptr<SsdTier> tier_;
  std::mutex hook_mu_;
  std::vector<Written> written_;
};

TEST_F(SsdTierPromoteTest, BatchLandsInPlaceThenOneNotifyReportsEveryKey) {
  StartTier();
  for (int i = 0; i < 3; ++i) Store(i);
  std::vector<rpc::PromotionTask> tasks = {Task(0), Task(1), Task(2)};
  size_t notified_at_data_done = 99;
  auto got = tier_->PromoteKeysFromLocalDisk(
      tasks, [&] { notified_at_data_done = fake_.notified().size(); });
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(got[size_t(i)].ok()) << i;
    EXPECT_TRUE(InSegment(i)) << i;
  }
  // The bytes are in place before the master hears of them.
  EXPECT_EQ(notified_at_data_done, 0u);
  EXPECT_EQ(fake_.calls(), (std::vector<std::string>{"BatchPromotionAllocStart",
                                                     "BatchPromotionNotify"}));
  auto notified = fake_.notified();
  ASSERT_EQ(notified.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(notified[size_t(i)].key(), "k" + std::to_string(i));
    EXPECT_EQ(notified[size_t(i)].task_id(), uint64_t(1000 + i));
    EXPECT_TRUE(notified[size_t(i)].success());
    EXPECT_FALSE(notified[size_t(i)].expired());
  }
  // Read straight into this node's aligned segment: no copy, and the
  // directory is given each record's verified version.
  EXPECT_EQ(
      tier_->metrics().CounterValue("kvpool_node_promotion_in_place_total", ""),
      3u);
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    ASSERT_EQ(written_.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(written_[size_t(i)].key, "k" + std::to_string(i));
      EXPECT_EQ(written_[size_t(i)].offset,
                fake_.offset_of("k" + std::to_string(i)));
      EXPECT_EQ(written_[size_t(i)].version, uint64_t(100 + i));
    }
  }
  EXPECT_EQ(Promoted("ok"), 3u);
  // Each step's time has its series, under its label value.
  const std::string text = tier_->metrics().RenderPrometheus();
  for (const char* phase : {"alloc", "read", "write", "notify"}) {
    EXPECT_NE(text.find(std::string("kvpool_node_promotion_phase_"
                                    "microseconds_total{phase=\"") +
                        phase + "\"}"),
              std::string::npos)
        << phase;
  }
}

TEST_F(SsdTierPromoteTest, AKeyThatFailsAnyStepIsReportedFailed) {
  // k0: the master refuses to stage it; k1: not on the disk; k2: lands.
  fake_.refuse = {"k0"};
  StartTier();
  Store(0);
  Store(2);
  std::vector<rpc::PromotionTask> tasks = {Task(0), Task(1), Task(2)};
  auto got = tier_->PromoteKeysFromLocalDisk(tasks);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].code(), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_FALSE(got[1].ok());
  EXPECT_TRUE(got[2].ok());
  EXPECT_TRUE(InSegment(2));
  auto notified = fake_.notified();
  ASSERT_EQ(notified.size(), 3u);
  EXPECT_FALSE(notified[0].success());
  EXPECT_FALSE(notified[1].success());
  EXPECT_TRUE(notified[2].success());
  EXPECT_EQ(Promoted("failed"), 2u);
  EXPECT_EQ(Promoted("ok"), 1u);
}

TEST_F(SsdTierPromoteTest, AnOlderMasterIsAskedKeyByKeyFromThenOn) {
  fake_.batch_rpcs = false;
  StartTier();
  Store(0);
  Store(1);
  std::vector<rpc::PromotionTask> tasks = {Task(0), Task(1)};
  auto got = tier_->PromoteKeysFromLocalDisk(tasks);
  EXPECT_TRUE(got[0].ok());
  EXPECT_TRUE(got[1].ok());
  EXPECT_FALSE(tier_->batch_rpcs());
  // One refused batch call, then one call per key for the rest of the
  // chain: its notify does not try the batch RPC again.
  EXPECT_EQ(fake_.calls(),
            (std::vector<std::string>{
                "BatchPromotionAllocStart", "PromotionAllocStart",
                "PromotionAllocStart", "NotifyPromotion", "NotifyPromotion"}));
  auto notified = fake_.notified();
  ASSERT_EQ(notified.size(), 2u);
  EXPECT_TRUE(notified[0].success());
  EXPECT_TRUE(notified[1].success());
}

TEST_F(SsdTierPromoteTest, QueuedPastItsDeadlineIsReportedExpiredUnread) {
  StartTier();
  Store(0);
  Store(1);
  tier_->PausePromotionsForTest(true);
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> tasks;
  *tasks.Add() = Task(0);
  tasks.Mutable(0)->set_deadline_in_ms(100);
  *tasks.Add() = Task(1);  // no deadline: runs whenever its turn comes
  tier_->EnqueuePromotions(tasks);
  EXPECT_EQ(tier_->queued_promotions(), 2u);
  clock_.Advance(101);
  tier_->PausePromotionsForTest(false);
  auto notified = fake_.WaitForNotified(2);
  ASSERT_EQ(notified.size(), 2u);
  // Expired first (reported before the batch runs), and never staged.
  EXPECT_EQ(notified[0].key(), "k0");
  EXPECT_FALSE(notified[0].success());
  EXPECT_TRUE(notified[0].expired());
  EXPECT_EQ(notified[1].key(), "k1");
  EXPECT_TRUE(notified[1].success());
  EXPECT_FALSE(notified[1].expired());
  EXPECT_TRUE(InSegment(1));
  EXPECT_EQ(fake_.calls(),
            (std::vector<std::string>{"NotifyPromotion", "PromotionAllocStart",
                                      "NotifyPromotion"}));
  EXPECT_EQ(Promoted("expired"), 1u);
  EXPECT_EQ(Promoted("ok"), 1u);
}

TEST_F(SsdTierPromoteTest, WithinItsDeadlineItIsPromoted) {
  StartTier();
  Store(0);
  tier_->PausePromotionsForTest(true);
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> tasks;
  *tasks.Add() = Task(0);
  tasks.Mutable(0)->set_deadline_in_ms(100);
  tier_->EnqueuePromotions(tasks);
  clock_.Advance(99);
  tier_->PausePromotionsForTest(false);
  auto notified = fake_.WaitForNotified(1);
  ASSERT_EQ(notified.size(), 1u);
  EXPECT_TRUE(notified[0].success());
  EXPECT_FALSE(notified[0].expired());
  EXPECT_TRUE(InSegment(0));
}

// promotion_drop_unreachable: after a batch that took 50 ms (of the fake
// clock) from the queue to bytes in place, a task due in 30 ms cannot land
// in time and one due in 200 ms can. With the knob the first is dropped
// unread and reported expired; without it both are read.
class SsdTierUnreachableTest : public SsdTierPromoteTest,
                               public ::testing::WithParamInterface<bool> {};

TEST_P(SsdTierUnreachableTest,
       ATaskThatCouldNotLandByItsDeadlineIsDroppedUnread) {
  const bool drop = GetParam();
  config_.promotion_drop_unreachable = drop;
  StartTier();
  // Every promoted value takes 50 ms to put in place.
  tier_->SetPromotionWrittenHook([this](uint64_t, uint64_t, uint64_t, uint64_t,
                                        const std::string&, const std::string&,
                                        uint64_t) { clock_.Advance(50); });
  for (int i = 0; i < 3; ++i) Store(i);
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> first;
  *first.Add() = Task(0);  // no deadline: measures the service time
  tier_->EnqueuePromotions(first);
  ASSERT_EQ(fake_.WaitForNotified(1).size(), 1u);

  tier_->PausePromotionsForTest(true);
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> tasks;
  *tasks.Add() = Task(1);
  tasks.Mutable(0)->set_deadline_in_ms(30);
  *tasks.Add() = Task(2);
  tasks.Mutable(1)->set_deadline_in_ms(200);
  tier_->EnqueuePromotions(tasks);
  tier_->PausePromotionsForTest(false);
  auto notified = fake_.WaitForNotified(3);
  ASSERT_EQ(notified.size(), 3u);
  // Earliest deadline first: k1, then k2.
  EXPECT_EQ(notified[1].key(), "k1");
  EXPECT_EQ(notified[1].success(), !drop);
  EXPECT_EQ(notified[1].expired(), drop);
  EXPECT_EQ(notified[2].key(), "k2");
  EXPECT_TRUE(notified[2].success());
  EXPECT_TRUE(InSegment(2));
  EXPECT_EQ(Promoted("expired"), drop ? 1u : 0u);
  EXPECT_EQ(Promoted("ok"), drop ? 2u : 3u);
  EXPECT_EQ(
      tier_->metrics().CounterValue("kvpool_node_promotions_unreachable_total"),
      drop ? 1u : 0u);
  // Dropped unread: never staged at the master.
  const auto calls = fake_.calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "PromotionAllocStart"),
            drop ? 2 : 3);
}

INSTANTIATE_TEST_SUITE_P(KnobOnAndOff, SsdTierUnreachableTest,
                         ::testing::Bool());

// A get of a key whose promotion is reading it from the disk joins that
// read (read sharing on): one disk read serves both, and the get has the
// promotion's verified bytes. With sharing off the get reads the disk again.
class SsdTierJoinTest : public SsdTierPromoteTest,
                        public ::testing::WithParamInterface<bool> {
 protected:
  // Stores key "k0" of tenant "default" on the SSD; returns its value.
  std::vector<uint8_t> StoreK0() {
    auto value = storage::testing::Pattern(kValue, 42);
    std::vector<WriteItem> items = {
        WriteItem{"default", "k0", value.data(), value.size(), 100}};
    EXPECT_TRUE(tier_->storage()->BatchWrite(items)[0].ok());
    return value;
  }
};

TEST_P(SsdTierJoinTest, AGetDuringThePromotionsReadJoinsIt) {
  const bool sharing = GetParam();
  config_.ssd_read_share_bytes = sharing ? (1 << 20) : 0;
  StartTier();
  const auto value = StoreK0();
  rpc::PromotionTask task = Task(0);
  task.set_tenant("default");

  // The promotion's disk read stalls 300 ms; the get arrives meanwhile.
  ASSERT_TRUE(ArmFailpoints("storage.read=pause:300@1").ok());
  std::vector<Status> promoted;
  std::thread promotion([&] {
    std::vector<rpc::PromotionTask> tasks = {task};
    promoted = tier_->PromoteKeysFromLocalDisk(tasks);
  });
  ASSERT_TRUE(kvpool::testing::WaitUntil(
      [] { return FailpointPasses("storage.read") >= 1; },
      std::chrono::seconds(10)));
  storage::AlignedBuffer dest(kValue);
  std::memset(dest.data(), 0, kValue);
  KeyReadOp op;
  op.tenant = "";  // a client's default tenant
  op.key = "k0";
  op.length = kValue;
  op.dest = dest.data();
  tier_->ServeReads({&op, 1});
  promotion.join();
  const uint64_t disk_reads = FailpointPasses("storage.read");
  DisarmFailpoints();

  EXPECT_EQ(op.result, ErrorCode::OK);
  EXPECT_EQ(std::memcmp(dest.data(), value.data(), kValue), 0);
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_TRUE(promoted[0].ok()) << promoted[0].ToString();
  EXPECT_TRUE(std::memcmp(segment_.data() + fake_.offset_of("k0"), value.data(),
                          kValue) == 0);
  if (sharing) {
    EXPECT_EQ(disk_reads, 1u);  // the promotion's only
    EXPECT_EQ(tier_->joined_read_stats().joined, 1u);
  } else {
    EXPECT_EQ(disk_reads, 2u);
    EXPECT_EQ(tier_->joined_read_stats().joined, 0u);
  }
}

// The other order: a get is reading a key from the disk when the worker
// comes to the promotion queued for it. With read sharing on, the promotion
// waits for the get's read and takes its bytes (one disk read); off, it
// reads the disk itself.
TEST_P(SsdTierJoinTest, APromotionDuringAGetsReadJoinsIt) {
  const bool sharing = GetParam();
  config_.ssd_read_share_bytes = sharing ? (1 << 20) : 0;
  StartTier();
  const auto value = StoreK0();
  tier_->PausePromotionsForTest(true);
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> tasks;
  *tasks.Add() = Task(0);
  tasks.Mutable(0)->set_tenant("default");
  tier_->EnqueuePromotions(tasks);  // queued: the get's read is wanted

  // The get's disk read stalls 700 ms (within the promotion's 1 s wait for
  // it); the worker is let go meanwhile.
  ASSERT_TRUE(ArmFailpoints("storage.read=pause:700@1").ok());
  storage::AlignedBuffer dest(kValue);
  std::memset(dest.data(), 0, kValue);
  KeyReadOp op;
  op.tenant = "";
  op.key = "k0";
  op.length = kValue;
  op.dest = dest.data();
  std::thread get([&] { tier_->ServeReads({&op, 1}); });
  ASSERT_TRUE(kvpool::testing::WaitUntil(
      [] { return FailpointPasses("storage.read") >= 1; },
      std::chrono::seconds(10)));
  tier_->PausePromotionsForTest(false);
  auto notified = fake_.WaitForNotified(1);
  get.join();
  const uint64_t disk_reads = FailpointPasses("storage.read");
  DisarmFailpoints();

  EXPECT_EQ(op.result, ErrorCode::OK);
  EXPECT_EQ(std::memcmp(dest.data(), value.data(), kValue), 0);
  ASSERT_EQ(notified.size(), 1u);
  EXPECT_TRUE(notified[0].success());
  EXPECT_TRUE(std::memcmp(segment_.data() + fake_.offset_of("k0"), value.data(),
                          kValue) == 0);
  if (sharing) {
    EXPECT_EQ(disk_reads, 1u);  // the get's only
    EXPECT_EQ(tier_->promotion_join_stats().joined, 1u);
    // Its bytes went to the promotion that joined, not also to the store
    // of reads kept for later promotions.
    EXPECT_EQ(tier_->shared_read_stats().offered, 0u);
  } else {
    EXPECT_EQ(disk_reads, 2u);
    EXPECT_EQ(tier_->promotion_join_stats().joined, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(ReadSharing, SsdTierJoinTest,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "On" : "Off";
                         });

// promotion_skip_after_get_ms: a prefetch promotion whose block one get has
// just read from the disk (no bytes kept for it) is dropped unread and
// reported failed, never staged; a prefetch promotion no get read, one of a
// block two gets read in a row, and a promote-on-hit (which a get's read
// triggers) still run. Off, all four read the disk.
class SsdTierSkipAfterGetTest : public SsdTierPromoteTest,
                                public ::testing::WithParamInterface<bool> {};

TEST_P(SsdTierSkipAfterGetTest, APrefetchPromotionAfterItsGetIsNotReadAgain) {
  const bool on = GetParam();
  config_.promotion_skip_after_get_ms = on ? 10000 : 0;
  StartTier();
  for (int i = 0; i < 3; ++i) {
    const auto v = storage::testing::Pattern(kValue, uint64_t(i));
    std::vector<WriteItem> items = {WriteItem{"default",
                                              "k" + std::to_string(i), v.data(),
                                              v.size(), uint64_t(100 + i)}};
    ASSERT_TRUE(tier_->storage()->BatchWrite(items)[0].ok());
  }
  // The engine's gets of k0 and k2 read the disk first, and two gets read
  // k3 (a shared block: its copy serves the next readers).
  {
    const auto v = storage::testing::Pattern(kValue, 3);
    std::vector<WriteItem> items = {
        WriteItem{"default", "k3", v.data(), v.size(), 103}};
    ASSERT_TRUE(tier_->storage()->BatchWrite(items)[0].ok());
  }
  for (int i : {0, 2, 3, 3}) {
    storage::AlignedBuffer dest(kValue);
    KeyReadOp op;
    op.tenant = "";
    op.key = "k" + std::to_string(i);
    op.length = kValue;
    op.dest = dest.data();
    tier_->ServeReads({&op, 1});
    ASSERT_EQ(op.result, ErrorCode::OK);
  }
  google::protobuf::RepeatedPtrField<rpc::PromotionTask> tasks;
  for (int i = 0; i < 4; ++i) {
    rpc::PromotionTask t = Task(i);
    t.set_tenant("default");
    t.set_from_prefetch(i != 2);  // k2: promote-on-hit
    *tasks.Add() = t;
  }
  tier_->EnqueuePromotions(tasks);
  auto notified = fake_.WaitForNotified(4);
  ASSERT_EQ(notified.size(), 4u);
  for (const auto& n : notified) {
    const bool skipped = on && n.key() == "k0";
    EXPECT_EQ(n.success(), !skipped) << n.key();
    EXPECT_FALSE(n.expired()) << n.key();
  }
  EXPECT_EQ(InSegment(1), true);
  EXPECT_EQ(InSegment(2), true);
  EXPECT_EQ(InSegment(3), true);
  EXPECT_EQ(tier_->metrics().CounterValue(
                "kvpool_node_promotions_skipped_after_get_total"),
            on ? 1u : 0u);
  // Dropped before staging: the master was never asked for its DRAM (one
  // task per batch here, so one PromotionAllocStart per task staged).
  const auto calls = fake_.calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "PromotionAllocStart"),
            on ? 3 : 4);
  // Past the window the block is fair game again.
  if (on) {
    clock_.Advance(10001);
    google::protobuf::RepeatedPtrField<rpc::PromotionTask> again;
    rpc::PromotionTask t = Task(0, 2000);
    t.set_tenant("default");
    t.set_from_prefetch(true);
    *again.Add() = t;
    tier_->EnqueuePromotions(again);
    auto more = fake_.WaitForNotified(5);
    ASSERT_EQ(more.size(), 5u);
    EXPECT_TRUE(more[4].success());
  }
}

INSTANTIATE_TEST_SUITE_P(KnobOnAndOff, SsdTierSkipAfterGetTest,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "On" : "Off";
                         });

}  // namespace
}  // namespace kvpool
