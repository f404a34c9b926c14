#include "common/host_id.h"

#include <unistd.h>

#include <fstream>

namespace kvpool {

std::string ReadHostId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  // "net:[4026531840]": the namespace's inode, the same for every process
  // in it.
  char net[64] = {0};
  const ssize_t n = readlink("/proc/self/ns/net", net, sizeof(net) - 1);
  return std::string(host) + "/" + boot + "/" +
         (n > 0 ? std::string(net, static_cast<size_t>(n)) : "net:?");
}

const std::string& LocalHostId() {
  static const std::string id = ReadHostId();
  return id;
}

}  // namespace kvpool
