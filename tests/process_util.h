// Child processes for multi-process tests: start (fork + exec), stop by
// PID, and SIGSTOP with a wait until the kernel has stopped every thread.
#ifndef KVPOOL_TESTS_PROCESS_UTIL_H_
#define KVPOOL_TESTS_PROCESS_UTIL_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace kvpool::testing {

// What a kvpool-node killed with SIGKILL leaves in /dev/shm: its segment
// files (kvpool-<pid>-...) and the huge tmpfs it mounted for them
// (kvpool-huge-<pid>-..., node/segment_dir.h), with their memory.
inline void RemoveSegmentFilesOf(pid_t pid) {
  namespace fs = std::filesystem;
  const std::string file = "kvpool-" + std::to_string(pid) + "-";
  const std::string mount = "kvpool-huge-" + std::to_string(pid) + "-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(mount, 0) == 0) {
      ::umount2(e.path().c_str(), MNT_DETACH);
      fs::remove(e.path(), ec);
    } else if (name.rfind(file, 0) == 0) {
      fs::remove(e.path(), ec);
    }
  }
}

// `log`: the child's stdout and stderr go there (else inherited); `env`:
// NAME=value entries added to the child's environment.
inline pid_t Spawn(const std::vector<std::string>& args,
                   const std::string& log = "",
                   const std::vector<std::string>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!log.empty()) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// SIGSTOP takes effect when the kernel next delivers it, not when kill()
// returns: wait until every thread of `pid` is stopped (state T).
inline bool StopAndWait(pid_t pid) {
  kill(pid, SIGSTOP);
  return WaitUntil(
      [&] {
        std::error_code ec;
        const std::filesystem::path tasks =
            "/proc/" + std::to_string(pid) + "/task";
        bool all = true, any = false;
        for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
          std::ifstream stat(t.path() / "stat");
          std::string line;
          std::getline(stat, line);
          // "pid (comm) S ...": the state follows the last ')'.
          const size_t p = line.rfind(')');
          if (p == std::string::npos || p + 2 >= line.size()) return false;
          any = true;
          all = all && line[p + 2] == 'T';
        }
        return any && all;
      },
      std::chrono::seconds(10));
}

inline void StopProcess(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  int status = 0;
  if (!WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                 std::chrono::seconds(10))) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
}

// The port a process started with --port_file=`path` wrote there once it
// listened, waiting up to `timeout`; 0 if it never did.
inline int WaitForPortFile(const std::filesystem::path& path,
                           std::chrono::milliseconds timeout) {
  int port = 0;
  WaitUntil(
      [&] {
        std::ifstream(path) >> port;
        return port > 0;
      },
      timeout);
  return port;
}

}  // namespace kvpool::testing

#endif  // KVPOOL_TESTS_PROCESS_UTIL_H_
