// CPU time of this process's threads, summed by thread name, from
// /proc/self/task: a benchmark that runs a cluster in one process takes two
// readings and says which threads (promotion workers, the master, the
// bench's own client) used the cores in between. A thread that ended
// between the readings is missing from the second one, so take them around
// a phase whose threads live through it.
#ifndef KVPOOL_BENCHUTIL_THREAD_CPU_H_
#define KVPOOL_BENCHUTIL_THREAD_CPU_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace kvpool::bench {

// Thread name (comm) -> user + system CPU seconds of all its threads.
inline std::map<std::string, double> ThreadCpuSeconds() {
  std::map<std::string, double> by_name;
  const double tick = double(sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(e.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    // "tid (comm) state ...": comm may hold spaces, so split at the last ')'.
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string name = stat.substr(open + 1, close - open - 1);
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    // Fields 3.. after comm; utime and stime are fields 14 and 15.
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    by_name[name] += (utime + stime) / tick;
  }
  return by_name;
}

// What each name used from `before` to `after` (names only in `after`
// count from 0).
inline std::map<std::string, double> CpuSince(
    const std::map<std::string, double>& before,
    const std::map<std::string, double>& after) {
  std::map<std::string, double> used;
  for (const auto& [name, s] : after) {
    auto it = before.find(name);
    const double d = s - (it == before.end() ? 0.0 : it->second);
    if (d > 0) used[name] = d;
  }
  return used;
}

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCHUTIL_THREAD_CPU_H_
