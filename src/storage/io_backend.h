// The I/O seam of the SSD tier: FileStorage hands batches of positioned
// reads and writes to an IoBackend. Two real backends exist (io_uring and
// pread/pwrite); tests wrap one to inject failures (see fault_backend.h).
#ifndef KVPOOL_STORAGE_IO_BACKEND_H_
#define KVPOOL_STORAGE_IO_BACKEND_H_

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "kvpool/status.h"

namespace kvpool::storage {

enum class IoOp : uint8_t { kRead, kWrite };

// One positioned vectored transfer. With O_DIRECT files every iov base,
// iov length and the offset must be multiples of kBlockSize.
struct IoRequest {
  static constexpr int kMaxIov = 3;

  IoOp op = IoOp::kRead;
  int fd = -1;
  uint64_t offset = 0;
  iovec iov[kMaxIov] = {};
  int iovcnt = 0;
  // Set by Submit: the number of bytes transferred, which equals length()
  // unless the file ended first, or -errno if an error stopped the transfer.
  int64_t result = 0;

  void Add(void* base, uint64_t len) {
    iov[iovcnt].iov_base = base;
    iov[iovcnt].iov_len = len;
    ++iovcnt;
  }
  uint64_t length() const {
    uint64_t n = 0;
    for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
    return n;
  }
};

// Reads a backend has finished without error and their summed time from
// submission to completion, as the submitter saw it (kernel and device
// queueing included). Over a stretch, read_ns / its length is the mean
// number of reads in flight (Little's law): with the mean read time, what
// tells a caller that keeps too few reads at the disk from a disk that
// serves each read slower.
struct IoReadTiming {
  uint64_t reads = 0;
  uint64_t read_ns = 0;
};

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  // Since the backend was made; monotonic, safe from any thread.
  IoReadTiming read_timing() const {
    return {reads_.load(std::memory_order_relaxed),
            read_ns_.load(std::memory_order_relaxed)};
  }
  virtual std::string_view name() const = 0;
  virtual bool is_io_uring() const { return false; }
  // Called with a request's index as soon as its result is final, on the
  // submitting thread, while later requests may still be in flight: work on
  // finished data (checksums) overlaps with the I/O that follows.
  using DoneFn = std::function<void(size_t index)>;

  // Runs every request, many in flight at once where the backend can, and
  // sets each result; partial transfers are continued until done, EOF or an
  // error. Returns when all are final. Thread-safe: several threads may
  // submit at the same time.
  virtual void Submit(std::span<IoRequest> requests, const DoneFn& done) = 0;
  void Submit(std::span<IoRequest> requests) { Submit(requests, DoneFn()); }

 protected:
  void CountRead(uint64_t ns) {
    reads_.fetch_add(1, std::memory_order_relaxed);
    read_ns_.fetch_add(ns, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> reads_{0}, read_ns_{0};
};

// preadv/pwritev, one request after the other.
std::unique_ptr<IoBackend> NewPreadBackend();

// `rings` io_uring instances of `queue_depth` entries each, so that
// concurrent batches do not wait for one another. Fails with the kernel's
// reason where io_uring_queue_init is refused (seccomp, old kernel, or a
// depth above the kernel's limit).
Result<std::unique_ptr<IoBackend>> NewIoUringBackend(unsigned queue_depth,
                                                     unsigned rings);

// Moves the iovecs of a partly done transfer past `n` bytes. Exposed for the
// backends and their tests.
void AdvanceIov(iovec* iov, int* iovcnt, uint64_t n);

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_IO_BACKEND_H_
