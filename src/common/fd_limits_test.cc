// The accept guard of common/fd_limits.h on a plain listening socket: with
// the descriptor table full, a guarded listener's accept4() sheds what
// waits and says EAGAIN (never EMFILE), and accepts again once there is
// room; an unguarded one is left alone.
#include "common/fd_limits.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace kvpool {
namespace {

// Non-blocking, as gRPC's listeners are.
int Listener(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(listen(fd, 64), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

// Whether the peer closed `fd` (EOF or reset within a second).
bool ClosedByPeer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 1000) != 1) return false;
  char c;
  return recv(fd, &c, 1, 0) <= 0;
}

// Opens /dev/null into every free descriptor below the highest open one,
// so that the lowest free descriptor is one past the highest; returns the
// descriptors it opened.
std::vector<int> FillHoles() {
  int highest = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    if (fcntl(fd, F_GETFD) != -1) highest = fd;
  }
  std::vector<int> fillers;
  for (;;) {
    const int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (f < 0 || f > highest) {
      if (f >= 0) close(f);
      return fillers;
    }
    fillers.push_back(f);
  }
}

// The descriptor the next open would get.
int LowestFree() {
  const int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
  close(f);
  return f;
}

TEST(FdLimitsTest, AGuardedListenerShedsInsteadOfFailingWhenTheTableIsFull) {
  int port = 0;
  const int lfd = Listener(&port);
  ASSERT_TRUE(GuardAccepts(port));  // opens the reserve descriptor
  const AcceptGuardStats before = GetAcceptGuardStats();
  std::vector<int> clients = {Connect(port), Connect(port)};
  const std::vector<int> fillers = FillHoles();
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  // Not one descriptor free.
  rlimit full = old;
  full.rlim_cur = LowestFree();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &full), 0);
  errno = 0;
  const int got = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  const int err = errno;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(got, -1);
  EXPECT_EQ(err, EAGAIN);  // not EMFILE: the caller keeps its listener
  const AcceptGuardStats after = GetAcceptGuardStats();
  EXPECT_EQ(after.shed_table_full - before.shed_table_full, 2u);
  for (int c : clients) EXPECT_TRUE(ClosedByPeer(c));
  // Room again: served as usual.
  const int c3 = Connect(port);
  const int s3 = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(s3, 0);
  for (int fd : clients) close(fd);
  for (int fd : fillers) close(fd);
  close(c3);
  close(s3);
  UnguardAccepts(port);
  close(lfd);
}

TEST(FdLimitsTest, AConnectionInTheLastDescriptorsIsClosedAtOnce) {
  int port = 0;
  const int lfd = Listener(&port);
  ASSERT_TRUE(GuardAccepts(port));
  const AcceptGuardStats before = GetAcceptGuardStats();
  const int c = Connect(port);
  const std::vector<int> fillers = FillHoles();
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  // A few descriptors free, fewer than the reserve (16 at least).
  rlimit tight = old;
  tight.rlim_cur = LowestFree() + 4;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  const int got = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  const int err = errno;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(got, -1);
  EXPECT_EQ(err, EAGAIN);
  EXPECT_EQ(GetAcceptGuardStats().shed_near_limit - before.shed_near_limit, 1u);
  EXPECT_TRUE(ClosedByPeer(c));
  close(c);
  for (int fd : fillers) close(fd);
  UnguardAccepts(port);
  close(lfd);
}

TEST(FdLimitsTest, AnUnguardedListenerSeesEmfile) {
  int port = 0;
  const int lfd = Listener(&port);
  const int c = Connect(port);
  const std::vector<int> fillers = FillHoles();
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit full = old;
  full.rlim_cur = LowestFree();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &full), 0);
  const int got = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  const int err = errno;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(got, -1);
  EXPECT_EQ(err, EMFILE);
  const int s = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(s, 0);  // still waiting there
  close(s);
  close(c);
  for (int fd : fillers) close(fd);
  close(lfd);
}

TEST(FdLimitsTest, TheReserveIsAnEighthOfTheLimitWithinBounds) {
  EXPECT_EQ(FdReserve(64), 16u);
  EXPECT_EQ(FdReserve(256), 32u);
  EXPECT_EQ(FdReserve(1024), 128u);
  EXPECT_EQ(FdReserve(1 << 20), 256u);
}

TEST(FdLimitsTest, RaisingTheLimitLeavesSoftEqualToHard) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  if (old.rlim_max < 128 || old.rlim_max == RLIM_INFINITY)
    GTEST_SKIP() << "hard limit " << old.rlim_max;
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const OpenFileLimit r = RaiseOpenFileLimit();
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_EQ(r.soft_before, 64u);
  EXPECT_EQ(r.soft, old.rlim_max);
  EXPECT_EQ(r.hard, old.rlim_max);
  EXPECT_EQ(now.rlim_cur, old.rlim_max);
}

}  // namespace
}  // namespace kvpool
