// AdvanceIov and the pread/pwrite backend.
#include <errno.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "storage/io_backend.h"

namespace kvpool::storage {

void AdvanceIov(iovec* iov, int* iovcnt, uint64_t n) {
  int skip = 0;
  while (skip < *iovcnt && n >= iov[skip].iov_len) {
    n -= iov[skip].iov_len;
    ++skip;
  }
  if (skip > 0) {
    std::memmove(iov, iov + skip, sizeof(iovec) * size_t(*iovcnt - skip));
    *iovcnt -= skip;
  }
  if (*iovcnt > 0 && n > 0) {
    iov[0].iov_base = static_cast<char*>(iov[0].iov_base) + n;
    iov[0].iov_len -= n;
  }
}

namespace {

class PreadBackend : public IoBackend {
 public:
  std::string_view name() const override { return "pread"; }

  using IoBackend::Submit;
  void Submit(std::span<IoRequest> requests, const DoneFn& done) override {
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      Run(requests[i]);
      if (requests[i].op == IoOp::kRead && requests[i].result >= 0) {
        CountRead(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - t0)
                               .count()));
      }
      if (done) done(i);
    }
  }

 private:
  static void Run(IoRequest& r) {
    iovec iov[IoRequest::kMaxIov];
    int iovcnt = r.iovcnt;
    std::memcpy(iov, r.iov, sizeof(iovec) * size_t(iovcnt));
    uint64_t done = 0;
    while (iovcnt > 0) {
      const off_t off = static_cast<off_t>(r.offset + done);
      ssize_t n = r.op == IoOp::kRead ? ::preadv(r.fd, iov, iovcnt, off)
                                      : ::pwritev(r.fd, iov, iovcnt, off);
      if (n < 0) {
        if (errno == EINTR) continue;
        r.result = -errno;
        return;
      }
      if (n == 0) break;  // end of file
      done += uint64_t(n);
      AdvanceIov(iov, &iovcnt, uint64_t(n));
    }
    r.result = static_cast<int64_t>(done);
  }
};

}  // namespace

std::unique_ptr<IoBackend> NewPreadBackend() {
  return std::make_unique<PreadBackend>();
}

}  // namespace kvpool::storage
