#include "replay/disk_cap.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvpool::replay {

namespace {

namespace fs = std::filesystem;

constexpr char kV1Root[] = "/sys/fs/cgroup/blkio";
constexpr char kV2Root[] = "/sys/fs/cgroup";
constexpr char kPrefix[] = "kvpool-replay-";

Status Write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text << std::flush;
  if (!f) {
    return Status(ErrorCode::FILE_WRITE_FAIL,
                  fmt::format("cannot write '{}' to {}: {}", text, path,
                              std::strerror(errno)));
  }
  return Status::OK();
}

// This process's group of a hierarchy, from /proc/self/cgroup: the line
// "N:blkio:/path" (v1) or "0::/path" (v2).
std::string OwnGroup(bool v1) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrl = line.substr(a + 1, b - a - 1);
    if (v1 ? ctrl.find("blkio") != std::string::npos
           : (line.compare(0, 2, "0:") == 0 && ctrl.empty())) {
      return line.substr(b + 1);
    }
  }
  return "/";
}

// The whole disk under `dir`: a partition's limits belong to its disk.
Result<std::string> DiskOf(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return Status(ErrorCode::FILE_NOT_FOUND,
                  fmt::format("--disk_cap: cannot stat {}: {}", dir,
                              std::strerror(errno)));
  }
  std::string dev = fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
  const std::string sys = "/sys/dev/block/" + dev;
  std::error_code ec;
  if (!fs::exists(sys, ec)) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("--disk_cap: {} is not on a block device ({}: "
                              "tmpfs or overlay?); a cap there would cap "
                              "nothing",
                              dir, dev));
  }
  if (fs::exists(sys + "/partition", ec)) {
    std::ifstream f(sys + "/../dev");
    std::string parent;
    if (f >> parent) dev = parent;
  }
  return dev;
}

// Groups left by replays that died before their destructor ran.
void RemoveStale(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + std::strlen(kPrefix));
    if (pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    ::rmdir(e.path().c_str());  // fails, harmlessly, if a process is in it
  }
}

}  // namespace

bool DiskCap::Supported(const std::string& dir) {
  if (geteuid() != 0 || !DiskOf(dir).ok()) return false;
  std::error_code ec;
  if (fs::exists(std::string(kV1Root) + "/cgroup.procs", ec)) return true;
  std::ifstream f(std::string(kV2Root) + "/cgroup.controllers");
  std::string c;
  while (f >> c) {
    if (c == "io") return true;
  }
  return false;
}

Result<std::unique_ptr<DiskCap>> DiskCap::Apply(const std::string& dir,
                                                uint64_t bytes_per_s) {
  if (bytes_per_s == 0) {
    return Status(ErrorCode::INVALID_PARAMS, "--disk_cap: a rate of 0");
  }
  auto dev = DiskOf(dir);
  if (!dev.ok()) return dev.status();
  std::error_code ec;
  const bool v1 = fs::exists(std::string(kV1Root) + "/cgroup.procs", ec);
  bool v2 = false;
  if (!v1) {
    std::ifstream f(std::string(kV2Root) + "/cgroup.controllers");
    std::string c;
    while (f >> c) v2 |= c == "io";
  }
  if (!v1 && !v2) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "--disk_cap: this machine has neither cgroup v1's blkio "
                  "nor cgroup v2's io controller; pass --disk_cap 0 to run "
                  "uncapped (results then drift with the disk)");
  }
  const std::string root = v1 ? kV1Root : kV2Root;
  RemoveStale(root);
  const std::string group = fmt::format("{}/{}{}", root, kPrefix, getpid());
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status(ErrorCode::INVALID_PARAMS,
                  fmt::format("--disk_cap: cannot create {}: {} (needs "
                              "root); pass --disk_cap 0 to run uncapped",
                              group, std::strerror(errno)));
  }
  const std::string home =
      (OwnGroup(v1) == "/" ? root : root + OwnGroup(v1)) + "/cgroup.procs";
  std::unique_ptr<DiskCap> cap(
      new DiskCap(bytes_per_s, dev.value(), group, home));
  Status s;
  if (v1) {
    s = Write(group + "/blkio.throttle.read_bps_device",
              fmt::format("{} {}", dev.value(), bytes_per_s));
    if (s.ok()) {
      s = Write(group + "/blkio.throttle.write_bps_device",
                fmt::format("{} {}", dev.value(), bytes_per_s));
    }
  } else {
    s = Write(group + "/io.max", fmt::format("{} rbps={} wbps={}", dev.value(),
                                             bytes_per_s, bytes_per_s));
  }
  // Last: the whole process (every thread) joins; children inherit it.
  if (s.ok()) s = Write(group + "/cgroup.procs", std::to_string(getpid()));
  if (!s.ok()) return s;  // the destructor removes the group
  return cap;
}

DiskCap::~DiskCap() {
  std::ofstream(home_) << getpid() << std::flush;
  ::rmdir(group_.c_str());
}

}  // namespace kvpool::replay
