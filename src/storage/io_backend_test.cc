#include "storage/io_backend.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "storage/segment_file.h"
#include "storage/storage_test_util.h"

namespace kvpool::storage {
namespace {

using testing::Pattern;

TEST(AdvanceIovTest, SkipsWholeAndPartialEntries) {
  char a[10], b[20], c[30];
  iovec iov[3] = {{a, 10}, {b, 20}, {c, 30}};
  int n = 3;
  AdvanceIov(iov, &n, 0);
  EXPECT_EQ(n, 3);
  AdvanceIov(iov, &n, 15);  // all of a, 5 of b
  ASSERT_EQ(n, 2);
  EXPECT_EQ(iov[0].iov_base, b + 5);
  EXPECT_EQ(iov[0].iov_len, 15u);
  EXPECT_EQ(iov[1].iov_base, c);
  AdvanceIov(iov, &n, 15);  // exactly the rest of b
  ASSERT_EQ(n, 1);
  EXPECT_EQ(iov[0].iov_base, c);
  AdvanceIov(iov, &n, 30);
  EXPECT_EQ(n, 0);
}

class IoBackendTest : public testing::StorageTest {};

TEST_P(IoBackendTest, BatchWritesAndReadsWithOneCallbackEach) {
  auto io = RealBackend();
  auto fd = OpenDirect(dir_.path() + "/f", O_RDWR | O_CREAT);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  constexpr int kN = 200;  // more than a ring's depth
  constexpr uint64_t kLen = 3 * kBlockSize;
  AlignedBuffer src(kN * kLen), dst(kN * kLen);
  const auto bytes = Pattern(kN * kLen, 1);
  std::memcpy(src.data(), bytes.data(), bytes.size());
  std::vector<IoRequest> reqs(kN);
  for (int i = 0; i < kN; ++i) {
    reqs[i].op = IoOp::kWrite;
    reqs[i].fd = *fd;
    reqs[i].offset = uint64_t(i) * kLen;
    // Split across iovecs to exercise vectored transfers.
    reqs[i].Add(src.data() + i * kLen, kBlockSize);
    reqs[i].Add(src.data() + i * kLen + kBlockSize, 2 * kBlockSize);
  }
  std::vector<int> calls(kN, 0);
  io->Submit(reqs, [&](size_t i) { ++calls[i]; });
  EXPECT_EQ(io->read_timing().reads, 0u);  // writes are not reads
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(reqs[i].result, int64_t(kLen)) << i;
    EXPECT_EQ(calls[i], 1) << i;
  }
  for (int i = 0; i < kN; ++i) {
    reqs[i] = IoRequest();
    reqs[i].op = IoOp::kRead;
    reqs[i].fd = *fd;
    reqs[i].offset = uint64_t(i) * kLen;
    reqs[i].Add(dst.data() + i * kLen, kLen);
  }
  const auto t0 = std::chrono::steady_clock::now();
  io->Submit(reqs);
  const auto wall = std::chrono::steady_clock::now() - t0;
  for (int i = 0; i < kN; ++i) EXPECT_EQ(reqs[i].result, int64_t(kLen));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kN * kLen), 0);
  // Every read counted once, each with a time within the batch's.
  const IoReadTiming t = io->read_timing();
  EXPECT_EQ(t.reads, uint64_t(kN));
  EXPECT_GT(t.read_ns, 0u);
  EXPECT_LE(t.read_ns / t.reads,
            uint64_t(std::chrono::nanoseconds(wall).count()));

  // Past the end: a short count; on a bad descriptor: -EBADF.
  IoRequest tail, bad;
  tail.fd = *fd;
  tail.offset = (kN - 1) * kLen + kBlockSize;
  tail.Add(dst.data(), 4 * kBlockSize);
  bad.fd = 1 << 20;
  bad.Add(dst.data(), kBlockSize);
  IoRequest both[2] = {tail, bad};
  io->Submit(both);
  EXPECT_EQ(both[0].result, int64_t(2 * kBlockSize));
  EXPECT_EQ(both[1].result, -EBADF);
  // The short read finished without error; the failed one is no read time.
  EXPECT_EQ(io->read_timing().reads, uint64_t(kN) + 1);
  ::close(*fd);
}

KVPOOL_STORAGE_BOTH_BACKENDS(IoBackendTest);

}  // namespace
}  // namespace kvpool::storage
