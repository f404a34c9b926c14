#include "storage/segment_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "storage/aligned_buffer.h"
#include "storage/record_format.h"

namespace kvpool::storage {

namespace {

std::string Errno(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

}  // namespace

Result<int> OpenDirect(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == EINVAL) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "O_DIRECT is not supported by the filesystem of " + path +
                      " (tmpfs and some overlay filesystems refuse it); put "
                      "ssd_dir on a disk-backed filesystem such as ext4 or "
                      "xfs");
  }
  if (err == ENOENT) {
    return Status(ErrorCode::FILE_NOT_FOUND, Errno("open " + path, err));
  }
  return Status(ErrorCode::FILE_WRITE_FAIL, Errno("open " + path, err));
}

Status ProbeDirectIo(const std::string& dir) {
  const std::string path = dir + "/.odirect-probe";
  ::unlink(path.c_str());
  auto fd = OpenDirect(path, O_RDWR | O_CREAT | O_TRUNC);
  if (!fd.ok()) return fd.status();
  AlignedBuffer buf(kBlockSize);
  std::memset(buf.data(), 0x5A, kBlockSize);
  Status st;
  if (::pwrite(*fd, buf.data(), kBlockSize, 0) != ssize_t(kBlockSize)) {
    const int err = errno;
    // ENOSPC: O_DIRECT itself worked (the open did), the disk is full.
    st = Status(err == EINVAL   ? ErrorCode::INVALID_PARAMS
                : err == ENOSPC ? ErrorCode::NO_AVAILABLE_HANDLE
                                : ErrorCode::FILE_WRITE_FAIL,
                Errno("O_DIRECT write probe in " + dir, err));
  } else if (::pread(*fd, buf.data(), kBlockSize, 0) != ssize_t(kBlockSize)) {
    st = Status(ErrorCode::FILE_READ_FAIL,
                Errno("O_DIRECT read probe in " + dir, errno));
  }
  ::close(*fd);
  ::unlink(path.c_str());
  return st;
}

Result<std::shared_ptr<SegmentFile>> SegmentFile::Create(const std::string& dir,
                                                         uint32_t id) {
  std::string path = dir + "/" + SegmentFileName(id);
  auto fd = OpenDirect(path, O_RDWR | O_CREAT | O_EXCL);
  if (!fd.ok()) return fd.status();
  return std::shared_ptr<SegmentFile>(
      new SegmentFile(id, *fd, std::move(path)));
}

Result<std::shared_ptr<SegmentFile>> SegmentFile::OpenExisting(
    const std::string& dir, uint32_t id, uint64_t* size) {
  std::string path = dir + "/" + SegmentFileName(id);
  auto fd = OpenDirect(path, O_RDWR);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int err = errno;
    ::close(*fd);
    return Status(ErrorCode::FILE_READ_FAIL, Errno("fstat " + path, err));
  }
  *size = uint64_t(st.st_size);
  return std::shared_ptr<SegmentFile>(
      new SegmentFile(id, *fd, std::move(path)));
}

SegmentFile::~SegmentFile() { ::close(fd_); }

}  // namespace kvpool::storage
