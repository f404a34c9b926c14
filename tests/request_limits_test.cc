// Requests over the master's bounds (issue #41, hole 4), against a real
// kvpool-master process: a batch of more than 65536 items, and a request
// over the byte bound derived from max_key_bytes (rpc/request_limits.h),
// come back INVALID_PARAMS with the limit in the message, through
// kvpool::Client and through a raw gRPC stub; and a storm of such requests
// from several callers leaves the master's resident memory where it was.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kvpool.grpc.pb.h"
#include "kvpool/client.h"
#include "rpc/request_limits.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

namespace kvpool {
namespace {

namespace fs = std::filesystem;
using testing::Spawn;
using testing::StopProcess;
using testing::WaitUntil;

// A field of /proc/<pid>/status in KiB ("RssAnon:"), or -1.
long StatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(field.size()));
  }
  return -1;
}

class RequestLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kvpool-limits-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    StopProcess(master_);
    if (HasFailure()) {
      std::ifstream log(dir_ / "master.log");
      std::cerr << "---- master.log\n" << log.rdbuf();
    }
    fs::remove_all(dir_);
  }
  // A kvpool-master on a free port with extra flags; its "host:port".
  std::string StartMaster(std::vector<std::string> flags = {}) {
    const fs::path port_file = dir_ / "port";
    std::vector<std::string> args = {
        std::string(KVPOOL_BIN_DIR) + "/kvpool-master", "--rpc_port=0",
        "--metrics_port=-1", "--port_file=" + port_file.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    master_ = Spawn(args, (dir_ / "master.log").string());
    const int port =
        testing::WaitForPortFile(port_file, std::chrono::seconds(25));
    EXPECT_GT(port, 0);
    address_ = "127.0.0.1:" + std::to_string(port);
    return address_;
  }
  std::unique_ptr<rpc::MasterService::Stub> RawStub() {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    return rpc::MasterService::NewStub(grpc::CreateCustomChannel(
        address_, grpc::InsecureChannelCredentials(), args));
  }
  std::unique_ptr<Client> NewClient() {
    ClientConfig cc;
    cc.master_server_address = address_;
    cc.transport = TransportMode::kTcp;
    cc.rpc_timeout_ms = 20000;
    auto c = Client::Create(cc);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c.value());
  }

  fs::path dir_;
  pid_t master_ = -1;
  std::string address_;
};

std::vector<std::string> Keys(size_t n, size_t length) {
  std::vector<std::string> keys(n, std::string(length, 'k'));
  for (size_t i = 0; i < n; ++i) {
    const std::string id = std::to_string(i);
    keys[i].replace(0, id.size(), id);
  }
  return keys;
}

// Every result is INVALID_PARAMS with `limit` in its message (one failure
// reported for all).
template <typename T>
void ExpectAllRefused(const std::vector<Result<T>>& results,
                      const std::string& limit) {
  size_t refused = 0;
  for (const auto& r : results) {
    refused += !r.ok() && r.status().code() == ErrorCode::INVALID_PARAMS &&
               r.status().message().find(limit) != std::string::npos;
  }
  EXPECT_EQ(refused, results.size())
      << "first: "
      << (results.empty()   ? std::string("none")
          : results[0].ok() ? std::string("ok")
                            : results[0].status().ToString());
}

TEST_F(RequestLimitsTest, ABatchOverTheItemLimitIsInvalidParams) {
  StartMaster();
  const std::vector<std::string> keys = Keys(kMaxBatchItems + 1, 16);
  // Through the client: refused (before sending), INVALID_PARAMS naming the
  // limit, for each key of the batch.
  auto client = NewClient();
  ExpectAllRefused(client->BatchIsExist(keys), "65536");
  ExpectAllRefused(client->BatchGetReplicaDesc(keys), "65536");
  // Through a raw stub, which nothing stops before the master: gRPC's
  // INVALID_ARGUMENT, the message naming kvpool's code and the limit.
  auto stub = RawStub();
  rpc::ExistKeyRequest req;
  for (const auto& k : keys) req.add_keys(k);
  for (auto method : {&rpc::MasterService::Stub::BatchExistKey,
                      &rpc::MasterService::Stub::ExistKey}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(20));
    rpc::ExistKeyResponse resp;
    const grpc::Status s = (stub.get()->*method)(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message().rfind("INVALID_PARAMS", 0), 0u)
        << s.error_message();
    EXPECT_NE(s.error_message().find("65536"), std::string::npos)
        << s.error_message();
  }
  // At the limit it is served.
  req.mutable_keys()->DeleteSubrange(0, 1);
  grpc::ClientContext ctx;
  rpc::ExistKeyResponse resp;
  ASSERT_TRUE(stub->BatchExistKey(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.error_codes_size(), kMaxBatchItems);
}

TEST_F(RequestLimitsTest, ARequestOverTheByteLimitIsInvalidParams) {
  // Short keys and tenants make the bound small: 65536 x (64 + 16 + 256)
  // bytes + 4 MiB = 25 MiB.
  StartMaster({"--max_key_bytes=64", "--max_tenant_name_bytes=16"});
  const uint64_t limit = MaxRequestBytes(64, 16);
  ASSERT_EQ(limit, 26214400u);
  // 40000 keys of 700 bytes: under the item limit, over the byte limit.
  const std::vector<std::string> keys = Keys(40000, 700);
  auto client = NewClient();
  ExpectAllRefused(client->BatchIsExist(keys), std::to_string(limit));
  // A raw stub gets gRPC's own refusal, with the limit.
  auto stub = RawStub();
  rpc::BatchKeyRequest req;
  for (const auto& k : keys) req.add_keys(k);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  rpc::BatchGetReplicaListResponse resp;
  const grpc::Status s = stub->BatchGetReplicaList(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_NE(s.error_message().find(std::to_string(limit)), std::string::npos)
      << s.error_message();
  // A batch under both limits is served.
  const auto small = client->BatchIsExist(Keys(1000, 64));
  for (const auto& r : small) EXPECT_TRUE(r.ok()) << r.status().ToString();
}

// Sends one serialized request, as bytes, to `method` of the master, and
// waits for its status.
grpc::Status RawCall(grpc::GenericStub* stub, const std::string& method,
                     const grpc::ByteBuffer& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::CompletionQueue cq;
  auto call = stub->PrepareUnaryCall(
      &ctx, "/kvpool.rpc.MasterService/" + method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

// The wire form of an ExistKeyRequest of tenant "t" and `n` keys of
// `length` bytes, written directly (no message, no copy: the test's memory
// stays one request).
grpc::ByteBuffer WireRequest(size_t n, size_t length) {
  auto varint = [](uint64_t v, char* out) {
    size_t i = 0;
    for (; v >= 0x80; v >>= 7) out[i++] = static_cast<char>(v | 0x80);
    out[i++] = static_cast<char>(v);
    return i;
  };
  char len[10];
  const size_t len_size = varint(length, len);
  const size_t total = 3 + n * (1 + len_size + length);
  char* buf = static_cast<char*>(std::malloc(total));
  std::memcpy(buf, "\x0a\x01t", 3);  // field 1, tenant: "t"
  char* p = buf + 3;
  for (size_t i = 0; i < n; ++i) {
    *p++ = 0x12;  // field 2, keys
    std::memcpy(p, len, len_size);
    p += len_size;
    std::memset(p, 'k', length);
    const std::string id = std::to_string(i);
    std::memcpy(p, id.data(), std::min(id.size(), length));
    p += length;
  }
  grpc::Slice slice(buf, total, std::free);
  return grpc::ByteBuffer(&slice, 1);
}

TEST_F(RequestLimitsTest, AStormOfRefusedRequestsLeavesTheMastersMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator stands in for glibc's malloc: "
                  "nothing for malloc_trim to give back, and a quarantine "
                  "that keeps freed memory resident on purpose";
#endif
  // Issue #41: four callers' refused 1,000,000-key batches took the
  // master's RssAnon from 11 MiB to 1 GiB, for good. Here four callers send
  // one each, and then one a request over the byte limit (refused by gRPC
  // before any handler runs); the master must come back within 64 MiB of
  // where it was.
  StartMaster();
  // The request over the byte limit goes on a connection of its own (a
  // channel outside the global subchannel pool): after gRPC refuses a
  // message for its size, the next call on that connection can wait
  // seconds (HTTP/2 flow control), which would only slow the test.
  auto channel = [&] {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(address_,
                                     grpc::InsecureChannelCredentials(), args);
  };
  grpc::GenericStub stub(channel());
  // A first call, so the baseline has gRPC's threads and buffers in it.
  const grpc::ByteBuffer small = WireRequest(10, 100);
  ASSERT_TRUE(RawCall(&stub, "BatchExistKey", small).ok());
  const long base = StatusKiB(master_, "RssAnon:");
  ASSERT_GT(base, 0);

  const grpc::ByteBuffer batch = WireRequest(1000000, 100);  // 102 MB
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - t)
            .count());
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> callers;
  std::atomic<int> refused{0}, other{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      const grpc::Status s = RawCall(&stub, "BatchExistKey", batch);
      (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? refused
                                                            : other)++;
    });
  }
  for (auto& t : callers) t.join();
  const long peak = StatusKiB(master_, "RssAnon:");
  const long long storm_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  {
    // One key of 320 MB: over the default bound (292 MiB).
    const grpc::ByteBuffer huge = WireRequest(1, 320 << 20);
    ASSERT_GT(huge.Length(), MaxRequestBytes(4096, 256));
    grpc::GenericStub own(channel());
    const grpc::Status s = RawCall(&own, "BatchExistKey", huge);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
  }
  const long long huge_ms = ms_since(t1);
  const auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(refused.load(), 4);
  EXPECT_EQ(other.load(), 0);
  long now = 0;
  const bool back = WaitUntil(
      [&] {
        now = StatusKiB(master_, "RssAnon:");
        return now >= 0 && now <= base + 64 * 1024;
      },
      std::chrono::seconds(6));
  std::printf(
      "master RssAnon: %ld MiB before, %ld MiB after the 4 callers (%lld "
      "ms), %ld MiB %lld ms after the 320 MB request (%lld ms)\n",
      base >> 10, peak >> 10, storm_ms, now >> 10, ms_since(t2), huge_ms);
  EXPECT_TRUE(back) << "RssAnon " << (now >> 10) << " MiB, was " << (base >> 10)
                    << " MiB";
  // And it still serves.
  EXPECT_TRUE(RawCall(&stub, "BatchExistKey", small).ok());
}

}  // namespace
}  // namespace kvpool
