#include "replay/cpu_usage.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "replay/clock_util.h"

namespace kvpool::replay {

namespace {

double TvSec(const timeval& t) { return double(t.tv_sec) + t.tv_usec / 1e6; }

// utime + stime of /proc/self/task/<tid>/stat; its comm may hold spaces
// and parentheses, so fields are counted from the last ')'.
bool ReadStat(const std::string& path, std::string* name, double* sec) {
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return false;
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return false;
  *name = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  // Fields after comm start at 3 (state); utime is 14, stime 15.
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  static const double hz = double(sysconf(_SC_CLK_TCK));
  *sec = double(utime + stime) / hz;
  return true;
}

bool ReadTask(int tid, std::string* name, double* sec) {
  return ReadStat("/proc/self/task/" + std::to_string(tid) + "/stat", name,
                  sec);
}

// The first line of /proc/stat: "cpu user nice system idle iowait irq
// softirq steal ...", in clock ticks summed over cores. Idle and iowait are
// not busy; guest time is already inside user.
bool ReadMachine(double* busy_s, double* total_s) {
  std::ifstream f("/proc/stat");
  std::string tag;
  if (!(f >> tag) || tag != "cpu") return false;
  unsigned long long v[8] = {};
  for (auto& x : v) {
    if (!(f >> x)) return false;
  }
  static const double hz = double(sysconf(_SC_CLK_TCK));
  const unsigned long long idle = v[3] + v[4];
  unsigned long long total = 0;
  for (auto x : v) total += x;
  *busy_s = double(total - idle) / hz;
  *total_s = double(total) / hz;
  return true;
}

}  // namespace

CpuReading ReadCpu(const std::vector<std::pair<std::string, int>>& others) {
  CpuReading r;
  r.wall_s = NowSec();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  r.process_s = TvSec(u.ru_utime) + TvSec(u.ru_stime);
  if (!ReadMachine(&r.machine_busy_s, &r.machine_total_s)) {
    r.machine_busy_s = r.machine_total_s = 0;
  }
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int tid = std::atoi(e->d_name);
      std::string name;
      double sec = 0;
      if (tid > 0 && ReadTask(tid, &name, &sec)) r.threads[{tid, name}] = sec;
    }
    closedir(d);
  }
  for (const auto& [label, pid] : others) {
    std::string name;
    double sec = 0;
    // A process's own stat sums its threads' times.
    if (ReadStat("/proc/" + std::to_string(pid) + "/stat", &name, &sec)) {
      r.others[label] += sec;
    }
  }
  return r;
}

std::string CpuComponentOf(const std::string& n) {
  auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
  if (starts("kvp-eng-step") || starts("kvp-eng-serial")) {
    return "engines: steps";
  }
  if (starts("kvp-eng-load")) return "engines: KV loads";
  if (starts("kvp-eng-put")) return "engines: stores";
  if (starts("kvp-promote") || starts("kvp-pull") || starts("kvp-prefetch") ||
      starts("kvp-cl-prefetch")) {
    return "holders: promotion";
  }
  if (starts("kvp-offload") || starts("kvp-ssd")) {
    return "holders: offload+SSD";
  }
  if (starts("kvp-data")) return "data servers";
  if (starts("kvp-master")) return "master";
  if (starts("grpc") || starts("default-exec") || starts("resolver-exec") ||
      starts("timer_manager") || starts("event_engine")) {
    return "gRPC (master+clients)";
  }
  return "other";
}

CpuUsage CpuBetween(const CpuReading& a, const CpuReading& b) {
  CpuUsage u;
  u.wall_s = b.wall_s - a.wall_s;
  u.process_s = b.process_s - a.process_s;
  double others = 0;
  for (const auto& [label, sec] : b.others) {
    auto it = a.others.find(label);
    // Listed even when idle (less than a clock tick of CPU).
    const double d =
        std::max(0.0, sec - (it == a.others.end() ? 0 : it->second));
    u.components[label] += d;
    others += d;
  }
  u.cores = int(std::max(1u, std::thread::hardware_concurrency()));
  u.capacity_s = u.wall_s * u.cores;
  u.utilisation = u.capacity_s > 0 ? u.process_s / u.capacity_s : 0;
  double seen = 0;
  for (const auto& [key, sec] : b.threads) {
    auto it = a.threads.find(key);
    const double d = sec - (it == a.threads.end() ? 0 : it->second);
    if (d <= 0) continue;
    u.components[CpuComponentOf(key.second)] += d;
    seen += d;
  }
  if (u.process_s > seen) u.components["ended threads"] = u.process_s - seen;
  u.process_s += others;
  u.utilisation = u.capacity_s > 0 ? u.process_s / u.capacity_s : 0;
  const double total = b.machine_total_s - a.machine_total_s;
  if (total > 0) {
    const double busy = b.machine_busy_s - a.machine_busy_s;
    u.machine_utilisation = std::clamp(busy / total, 0.0, 1.0);
    // The ticks of /proc/stat and of the process's own accounting differ by
    // a tick or so; a share below zero is that rounding.
    u.outside_utilisation = std::clamp((busy - u.process_s) / total, 0.0, 1.0);
  }
  return u;
}

}  // namespace kvpool::replay
