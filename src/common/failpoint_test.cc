#include "common/failpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

namespace kvpool {
namespace {

constexpr const char* kPoint = "master.put_end.after_commit";

TEST(FailpointTest, BadSpecsAreRefused) {
  EXPECT_EQ(ArmFailpoints("nonsense").code(), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ArmFailpoints("no.such.point=crash").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ArmFailpoints(std::string(kPoint) + "=explode").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ArmFailpoints(std::string(kPoint) + "=crash@0").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ArmFailpoints(std::string(kPoint) + "=pause:x").code(),
            ErrorCode::INVALID_PARAMS);
  EXPECT_FALSE(failpoint_internal::any_armed.load());
}

TEST(FailpointTest, PauseActsOnItsPassOnly) {
  ASSERT_TRUE(ArmFailpoints(std::string(kPoint) + "=pause:200@2").ok());
  auto timed = [] {
    const auto t0 = std::chrono::steady_clock::now();
    KVPOOL_FAILPOINT("master.put_end.after_commit");
    return std::chrono::steady_clock::now() - t0;
  };
  EXPECT_LT(timed(), std::chrono::milliseconds(150));
  EXPECT_GE(timed(), std::chrono::milliseconds(200));
  EXPECT_LT(timed(), std::chrono::milliseconds(150));
  EXPECT_EQ(FailpointPasses(kPoint), 3u);
  DisarmFailpoints();
  EXPECT_EQ(FailpointPasses(kPoint), 0u);
}

TEST(FailpointTest, CrashKillsTheProcessThere) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!ArmFailpoints(std::string(kPoint) + "=crash@2").ok()) _exit(3);
    KVPOOL_FAILPOINT("master.put_end.after_commit");  // pass 1: nothing
    KVPOOL_FAILPOINT("master.put_end.after_commit");  // pass 2: SIGKILL
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

TEST(FailpointTest, APlusActsOnEveryPassFromItsOwn) {
  ASSERT_TRUE(ArmFailpoints("storage.read=pause:60@2+").ok());
  auto timed = [] {
    const auto t0 = std::chrono::steady_clock::now();
    KVPOOL_FAILPOINT("storage.read");
    return std::chrono::steady_clock::now() - t0;
  };
  EXPECT_LT(timed(), std::chrono::milliseconds(50));
  EXPECT_GE(timed(), std::chrono::milliseconds(60));
  EXPECT_GE(timed(), std::chrono::milliseconds(60));
  EXPECT_EQ(ArmFailpoints("storage.read=pause:60@x+").code(),
            ErrorCode::INVALID_PARAMS);
  DisarmFailpoints();
}

}  // namespace
}  // namespace kvpool
