#include "bench/soak_sampler.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

namespace kvpool::soak {

namespace fs = std::filesystem;

ProcSample SampleProcess(pid_t pid) {
  ProcSample s;
  const std::string base = "/proc/" + std::to_string(pid);
  FILE* f = std::fopen((base + "/status").c_str(), "r");
  if (!f) return s;
  char line[256];
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &v) == 1) {
      s.rss_bytes = v * 1024;
    } else if (std::sscanf(line, "Threads: %llu", &v) == 1) {
      s.threads = static_cast<int>(v);
    }
  }
  std::fclose(f);
  // A zombie keeps its status file but has no memory and no threads left:
  // only a live process counts as alive.
  s.alive = s.threads > 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(base + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++s.fds;
  }
  return s;
}

uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  // Files come and go under a running store (segment rotation, GC): what
  // vanishes between listing and lstat is skipped, and a directory that
  // cannot be listed counts as empty, instead of failing the walk.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      total += DiskBytes(e.path().string());
    } else if (S_ISREG(st.st_mode)) {
      total += uint64_t(st.st_blocks) * 512;
    }
  }
  return total;
}

}  // namespace kvpool::soak
