#include "common/host_id.h"

#include <unistd.h>

#include <fstream>

namespace kvpool {

const std::string& LocalHostId() {
  static const std::string id = [] {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::string boot;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, boot);
    return std::string(host) + "/" + boot;
  }();
  return id;
}

}  // namespace kvpool
