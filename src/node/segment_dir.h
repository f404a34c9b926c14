// The directory a node creates its segment files in (NodeConfig::
// segment_dir, segment_huge_pages).
//
// On 4 KiB pages (/dev/shm as most hosts mount it) every process that
// copies into or out of a segment sets up a page-table entry per 4 KiB of
// it, at its first copy of each part (~0.1 ms per 2 MiB here: a reader's
// first read of a value cost 1.2-1.6x its repeated read) and keeps 2 MiB of
// page tables per GiB it touched. On 2 MiB pages that is one entry per
// 2 MiB: first and repeated reads cost the same and the page tables of a
// GiB are 4 KiB (docs/results/fresh-dram/). So where segment_dir gives
// small pages and segment_huge_pages is on, the node mounts a private
// tmpfs with huge=within_size under it (needs CAP_SYS_ADMIN) and creates
// its segments there; clients open them by the path the master hands out,
// as before. Where it cannot (no privilege, no THP for tmpfs) it logs why
// and how to get huge pages, and uses segment_dir as it is.
#ifndef KVPOOL_NODE_SEGMENT_DIR_H_
#define KVPOOL_NODE_SEGMENT_DIR_H_

#include <memory>
#include <string>

namespace kvpool {

class SegmentDir {
 public:
  // Removes segment files and huge mounts under `segment_dir` left by
  // nodes that died without cleaning up, then picks the directory (see
  // above). `tag` names the mount point (the node's id). `mount_options`:
  // the tmpfs options to mount with (tests pass bad ones to see the
  // fallback).
  static std::unique_ptr<SegmentDir> Open(
      const std::string& segment_dir, bool huge_pages, const std::string& tag,
      const std::string& mount_options = "huge=within_size");
  // Unmounts the node's own mount, if it made one (lazily: a process that
  // still maps a segment keeps its memory until it unmaps it).
  ~SegmentDir();
  SegmentDir(const SegmentDir&) = delete;
  SegmentDir& operator=(const SegmentDir&) = delete;

  const std::string& path() const { return path_; }
  // Files created here get 2 MiB pages.
  bool huge() const { return huge_; }
  // Whether `path()` is a mount this node made.
  bool mounted() const { return mounted_; }
  // Why the segments are not on huge pages ("" when they are).
  const std::string& why_not_huge() const { return why_not_; }

 private:
  SegmentDir() = default;
  std::string path_;
  bool huge_ = false;
  bool mounted_ = false;
  std::string why_not_;
};

// The page size a file created in `dir` gets (st_blksize of a probe file:
// 2 MiB on a huge tmpfs or hugetlbfs); 0 if no file can be created there.
uint64_t FilePageSize(const std::string& dir);

}  // namespace kvpool

#endif  // KVPOOL_NODE_SEGMENT_DIR_H_
