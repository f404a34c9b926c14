// A disk of one speed for the replay: this process (and every process it
// starts afterwards) joins a cgroup whose reads and writes on the disk under
// a directory are capped at a fixed rate, for as long as the DiskCap lives.
//
// The development VMs' disks are shared and their speed drifts several times
// over within minutes (docs/replay.md, "A disk of one speed"); a replay whose
// SSD reads run at whatever the disk gives that minute cannot be repeated.
// Held below the disk's slowest, the cap is the disk's speed, and the replay
// sizes its model from it rather than from a burst the throttle lets through.
#ifndef KVPOOL_REPLAY_DISK_CAP_H_
#define KVPOOL_REPLAY_DISK_CAP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "kvpool/status.h"

namespace kvpool::replay {

class DiskCap {
 public:
  // Caps reads and writes of the whole disk holding `dir` at `bytes_per_s`
  // each (cgroup v1 blkio, else cgroup v2 io) and moves this process into
  // the group. Needs root; fails with a message saying what is missing
  // rather than running uncapped.
  static Result<std::unique_ptr<DiskCap>> Apply(const std::string& dir,
                                                uint64_t bytes_per_s);
  // Whether Apply could work here: root, a blkio or io controller, and
  // `dir` on a block device. Apply still says why when it cannot.
  static bool Supported(const std::string& dir);
  // Moves this process back to the group it came from and removes the
  // group.
  ~DiskCap();
  DiskCap(const DiskCap&) = delete;
  DiskCap& operator=(const DiskCap&) = delete;

  uint64_t bytes_per_s() const { return bytes_per_s_; }
  const std::string& device() const { return device_; }  // "major:minor"
  const std::string& group() const { return group_; }    // cgroup directory

 private:
  DiskCap(uint64_t bps, std::string device, std::string group, std::string home)
      : bytes_per_s_(bps),
        device_(std::move(device)),
        group_(std::move(group)),
        home_(std::move(home)) {}

  uint64_t bytes_per_s_;
  std::string device_;
  std::string group_;
  std::string home_;  // the cgroup.procs to return to
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_DISK_CAP_H_
