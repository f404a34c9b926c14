// The replay's timing pieces: the machine's CPU as the judge of contention,
// the modelled host-to-GPU copy, and the disk cap's cgroup.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "replay/arm.h"
#include "replay/clock_util.h"
#include "replay/cpu_usage.h"
#include "replay/disk_cap.h"
#include "replay/kv_io.h"
#include "replay/report_parts.h"

namespace kvpool::replay {
namespace {

TEST(CpuUsageTest, TheMachineIsReadAndIncludesThisProcess) {
  const CpuReading a = ReadCpu();
  ASSERT_GT(a.machine_total_s, 0);
  // This thread burns 300 ms of its own CPU time (not of wall time: on a
  // loaded machine it may get a small share of a core, which is no failure
  // of the reading).
  auto thread_cpu_s = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  };
  const double until = thread_cpu_s() + 0.3;
  const double give_up = NowSec() + 60;
  volatile uint64_t x = 0;
  while (thread_cpu_s() < until && NowSec() < give_up) x = x + 1;
  const CpuUsage u = CpuBetween(a, ReadCpu());
  EXPECT_GE(u.process_s, 0.29);
  EXPECT_GT(u.utilisation, 0.0);
  EXPECT_NEAR(u.utilisation, u.process_s / u.capacity_s, 1e-9);
  EXPECT_GE(u.machine_utilisation, u.utilisation - 0.05);
  EXPECT_LE(u.machine_utilisation, 1.0);
  EXPECT_GE(u.outside_utilisation, 0.0);
}

TEST(CpuUsageTest, AnArmIsContendedWhenTheMachineIsBusyNotOnlyItsProcess) {
  ArmResult a;
  a.cpu.utilisation = 0.3;           // the replay itself was light ...
  a.cpu.machine_utilisation = 0.97;  // ... but other work filled the machine
  a.cpu.outside_utilisation = 0.67;
  auto j = ArmPartsJson(a);
  EXPECT_TRUE(j["cpu"]["contended"].get<bool>());
  EXPECT_DOUBLE_EQ(j["cpu"]["outside_utilisation"].get<double>(), 0.67);
  a.cpu.machine_utilisation = 0.5;
  EXPECT_FALSE(ArmPartsJson(a)["cpu"]["contended"].get<bool>());
}

TEST(KvIoTest, TheHostToGpuCopyBoundsALoadFromBelow) {
  PrefixLoad l;
  l.read_ok = 4;
  l.get_start_s = NowSec();
  l.done_s = l.get_start_s + 0.001;  // a memcpy-fast read
  ModelHostToGpuCopy(5.0, &l);       // 4 blocks x 5 ms
  EXPECT_NEAR(l.done_s, l.get_start_s + 0.020, 1e-9);
  EXPECT_GE(NowSec(), l.done_s);
  // A read slower than the copy is left as it was.
  PrefixLoad slow = l;
  slow.done_s = slow.get_start_s + 0.050;
  ModelHostToGpuCopy(5.0, &slow);
  EXPECT_DOUBLE_EQ(slow.done_s, slow.get_start_s + 0.050);
  PrefixLoad none;  // nothing read, nothing copied
  none.done_s = 1;
  ModelHostToGpuCopy(5.0, &none);
  EXPECT_EQ(none.done_s, 1);
}

nlohmann::json Arm(const std::string& name, double p50) {
  return {{"name", name},
          {"ok", true},
          {"ttft_ms", {{"p50", p50}, {"mean", p50}}},
          {"cpu", {{"contended", false}}}};
}

TEST(VerdictTest, EachArmIsJudgedAgainstTheRangeOfTheOffRuns) {
  nlohmann::json r;
  // Off 100-110: the band is 90-120 (the range, 10, on each side).
  r["arms"] = {Arm("off", 100),          Arm("router", 89),  Arm("exist", 91),
               Arm("exist+router", 121), Arm("on-hit", 119), Arm("off#2", 110)};
  AddComparisons(&r);
  EXPECT_EQ(r["arms"][1]["verdict"]["verdict"], "better");
  EXPECT_EQ(r["arms"][2]["verdict"]["verdict"], "within noise");
  EXPECT_EQ(r["arms"][3]["verdict"]["verdict"], "worse");
  EXPECT_EQ(r["arms"][4]["verdict"]["verdict"], "within noise");
  EXPECT_FALSE(r["arms"][0].contains("verdict"));
  EXPECT_NE(r["arms"][1]["verdict"]["sentence"].get<std::string>().find(
                "off 100.0-110.0 ms over 2 runs"),
            std::string::npos);
  // Off runs that agree closely still leave a 2% margin: 0.5% is noise.
  nlohmann::json tight;
  tight["arms"] = {Arm("off", 100), Arm("exist", 99.5), Arm("router", 97),
                   Arm("off#2", 100.2)};
  AddComparisons(&tight);
  EXPECT_EQ(tight["arms"][1]["verdict"]["verdict"], "within noise");
  EXPECT_EQ(tight["arms"][2]["verdict"]["verdict"], "better");
  // A contended arm keeps its verdict but says it is not a result.
  r["arms"][1]["cpu"]["contended"] = true;
  r["arms"][1].erase("verdict");
  AddComparisons(&r);
  EXPECT_NE(r["arms"][1]["verdict"]["sentence"].get<std::string>().find(
                "not a result"),
            std::string::npos);
  // One off run has no spread: no verdict is given.
  nlohmann::json one;
  one["arms"] = {Arm("off", 100), Arm("router", 50)};
  AddComparisons(&one);
  EXPECT_EQ(one["arms"][1]["verdict"]["verdict"], "unknown");
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(DiskCapTest, ThisProcessRunsInACappedGroupForTheCapsLifetime) {
  if (!DiskCap::Supported("/var/tmp") ||
      !std::filesystem::exists("/sys/fs/cgroup/blkio")) {
    GTEST_SKIP() << "needs root, cgroup v1 blkio and /var/tmp on a disk";
  }
  std::string group;
  {
    auto cap = DiskCap::Apply("/var/tmp", 50ull << 20);
    ASSERT_TRUE(cap.ok()) << cap.status().ToString();
    group = cap.value()->group();
    const std::string me = std::to_string(getpid());
    EXPECT_NE(ReadAll(group + "/cgroup.procs").find(me), std::string::npos);
    EXPECT_NE(
        ReadAll(group + "/blkio.throttle.read_bps_device")
            .find(cap.value()->device() + " " + std::to_string(50ull << 20)),
        std::string::npos);
    EXPECT_NE(ReadAll(group + "/blkio.throttle.write_bps_device")
                  .find(std::to_string(50ull << 20)),
              std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(group));
}

TEST(DiskCapTest, ADirectoryNotOnABlockDeviceIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto cap = DiskCap::Apply("/dev/shm", 50ull << 20);
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.status().message().find("not on a block device"),
            std::string::npos);
}

}  // namespace
}  // namespace kvpool::replay
