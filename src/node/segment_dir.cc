#include "node/segment_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace kvpool {
namespace {

constexpr uint64_t kHugePage = 2ull << 20;
constexpr char kMountPrefix[] = "kvpool-huge-";

bool PidGone(const char* digits) {
  const long pid = std::strtol(digits, nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Segments of nodes that died without unmapping (SIGKILL) stay and hold
// RAM; the pid in the name tells whether the owner is gone. A dead node's
// huge mount goes with everything in it.
void RemoveStale(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string path = e.path().string();
    if (name.rfind(kMountPrefix, 0) == 0) {
      if (!PidGone(name.c_str() + sizeof(kMountPrefix) - 1)) continue;
      ::umount2(path.c_str(), MNT_DETACH);
      if (::rmdir(path.c_str()) == 0)
        spdlog::info("removed stale segment mount {}", path);
    } else if (name.rfind("kvpool-", 0) == 0 && PidGone(name.c_str() + 7)) {
      std::filesystem::remove(e.path(), ec);
      spdlog::info("removed stale segment file {}", path);
    }
  }
}

}  // namespace

uint64_t FilePageSize(const std::string& dir) {
  const std::string probe =
      dir + "/.kvpool-page-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  // A huge tmpfs with huge=within_size reports its huge page only for a
  // file big enough to hold one; the size allocates nothing.
  struct stat st {};
  const bool ok = ::ftruncate(fd, kHugePage) == 0 && ::fstat(fd, &st) == 0;
  ::close(fd);
  ::unlink(probe.c_str());
  return ok ? static_cast<uint64_t>(st.st_blksize) : 0;
}

std::unique_ptr<SegmentDir> SegmentDir::Open(const std::string& segment_dir,
                                             bool huge_pages,
                                             const std::string& tag,
                                             const std::string& mount_options) {
  RemoveStale(segment_dir);
  std::unique_ptr<SegmentDir> d(new SegmentDir());
  d->path_ = segment_dir;
  if (FilePageSize(segment_dir) >= kHugePage) {
    d->huge_ = true;
    return d;
  }
  if (!huge_pages) {
    d->why_not_ = "segment_huge_pages is off";
    return d;
  }
  std::string leaf = kMountPrefix + std::to_string(::getpid()) + "-" + tag;
  for (char& c : leaf) {
    if (c == '/') c = '_';
  }
  const std::string mnt =
      (segment_dir.back() == '/' ? segment_dir : segment_dir + "/") + leaf;
  // As large as segment_dir may grow: the node's later extra segments go
  // here too. (0 blocks: no limit there, and tmpfs's default here.)
  std::string options = mount_options + ",mode=0755";
  struct statfs fs {};
  if (::statfs(segment_dir.c_str(), &fs) == 0 && fs.f_blocks > 0) {
    options += ",size=" + std::to_string(uint64_t(fs.f_blocks) * fs.f_frsize);
  }
  std::string why;
  // A leftover of this pid (a container's node restarted as the same pid
  // on a kept /dev/shm): nobody alive uses it.
  if (::umount2(mnt.c_str(), MNT_DETACH) == 0 || errno != ENOENT) {
    ::rmdir(mnt.c_str());
  }
  if (::mkdir(mnt.c_str(), 0755) != 0) {
    why = "cannot create " + mnt + ": " + std::strerror(errno);
  } else if (::mount("kvpool", mnt.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                     options.c_str()) != 0) {
    why = "cannot mount a tmpfs (" + options + ") at " + mnt + ": " +
          std::strerror(errno) +
          (errno == EPERM ? " (mounting needs CAP_SYS_ADMIN)" : "");
    ::rmdir(mnt.c_str());
  } else if (FilePageSize(mnt) < kHugePage) {
    why = "a tmpfs mounted with " + mount_options +
          " gives no huge pages here "
          "(/sys/kernel/mm/transparent_hugepage/shmem_enabled is deny?)";
    ::umount2(mnt.c_str(), MNT_DETACH);
    ::rmdir(mnt.c_str());
  } else {
    d->path_ = mnt;
    d->huge_ = true;
    d->mounted_ = true;
    // Only processes of this mount namespace see it: one in another that
    // shares segment_dir (a container with /dev/shm bound in) would fall
    // back to TCP.
    spdlog::info(
        "segments on 2 MiB pages: in {}, a tmpfs ({}) of this node; "
        "same-host clients must see this mount (else they use TCP; "
        "--segment_huge_pages=false keeps segments in {})",
        mnt, options, segment_dir);
    return d;
  }
  d->why_not_ = why;
  spdlog::warn(
      "segments on 4 KiB pages in {}: {}. Every process that copies into or "
      "out of them sets up page tables per 4 KiB at its first touch (~0.1 ms "
      "per 2 MiB, on the first get or put of each part) and keeps 2 MiB of "
      "them per GiB. For 2 MiB pages: run the node with CAP_SYS_ADMIN, or "
      "give --segment_dir a tmpfs mounted with huge=within_size (mount -t "
      "tmpfs -o huge=within_size,size=<bytes> none <dir>) or a hugetlbfs "
      "mount (docs/configuration.md, segment_huge_pages)",
      segment_dir, why);
  return d;
}

SegmentDir::~SegmentDir() {
  if (!mounted_) return;
  // Lazily: mappings of its files (a client of this process, a reader
  // elsewhere) keep their memory until they go.
  ::umount2(path_.c_str(), MNT_DETACH);
  ::rmdir(path_.c_str());
}

}  // namespace kvpool
