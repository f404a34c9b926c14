#include "common/host_id.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace kvpool {
namespace {

// ReadHostId in a child process, after unshare(flags) when flags != 0;
// empty when the child could not unshare (not root).
std::string HostIdOfChild(int flags) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (flags != 0 && unshare(flags) != 0) _exit(1);
    const std::string id = ReadHostId();
    (void)!write(fds[1], id.data(), id.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : "";
}

TEST(HostIdTest, AnotherNetworkNamespaceIsAnotherHost) {
  const std::string here = ReadHostId();
  EXPECT_EQ(here, LocalHostId());
  EXPECT_NE(here.find("/net:["), std::string::npos) << here;
  EXPECT_EQ(HostIdOfChild(0), here);  // another process, same namespace
  const std::string other = HostIdOfChild(CLONE_NEWNET);
  if (other.empty()) GTEST_SKIP() << "cannot unshare the network (not root)";
  EXPECT_NE(other, here);
  // Same machine otherwise: only the namespace part differs.
  EXPECT_EQ(other.substr(0, other.rfind('/')), here.substr(0, here.rfind('/')));
}

}  // namespace
}  // namespace kvpool
