// The io_uring backend: a batch is one ring's worth of requests in flight
// at once, refilled as completions arrive.
#include <errno.h>
#include <liburing.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "storage/io_backend.h"

#if defined(__SANITIZE_THREAD__)
#define KVPOOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVPOOL_TSAN 1
#endif
#endif
#ifdef KVPOOL_TSAN
// ThreadSanitizer's dynamic annotation: forget the history of a range.
extern "C" void AnnotateNewMemory(const char* file, int line,
                                  const volatile void* mem, size_t size);
#endif

namespace kvpool::storage {

namespace {

// io_uring_queue_init, and under ThreadSanitizer the rings declared new
// memory: liburing maps them with raw system calls, which TSan does not
// see, so their shadow keeps whatever a thread that used the same
// addresses before did (a finished thread's stack, say) and the first
// acquire-load of the completion queue's head is reported as a race.
int InitRing(unsigned depth, io_uring* ring) {
  const int ret = io_uring_queue_init(depth, ring, 0);
#ifdef KVPOOL_TSAN
  if (ret == 0) {
    AnnotateNewMemory(__FILE__, __LINE__, ring->sq.ring_ptr, ring->sq.ring_sz);
    AnnotateNewMemory(__FILE__, __LINE__, ring->cq.ring_ptr, ring->cq.ring_sz);
    AnnotateNewMemory(__FILE__, __LINE__, ring->sq.sqes,
                      sizeof(io_uring_sqe) * ring->sq.ring_entries);
  }
#endif
  return ret;
}

class IoUringBackend : public IoBackend {
 public:
  struct Ring {
    std::mutex mu;
    io_uring ring;
    bool live = false;  // false after a failed re-initialisation
  };

  IoUringBackend(unsigned depth, std::vector<std::unique_ptr<Ring>> rings)
      : depth_(depth), rings_(std::move(rings)), fallback_(NewPreadBackend()) {}

  ~IoUringBackend() override {
    for (auto& r : rings_) {
      if (r->live) io_uring_queue_exit(&r->ring);
    }
  }

  std::string_view name() const override { return "io_uring"; }
  bool is_io_uring() const override { return true; }

  using IoBackend::Submit;
  void Submit(std::span<IoRequest> requests, const DoneFn& done) override {
    if (requests.empty()) return;
    Ring* ring = nullptr;
    std::unique_lock<std::mutex> lock = AcquireRing(&ring);
    if (!ring->live) {
      fallback_->Submit(requests, done);
      return;
    }
    Run(ring, requests, done);
  }

 private:
  // Progress of one request; the iovecs are a copy so that the caller's
  // stay untouched and the kernel reads stable memory until completion.
  struct Work {
    iovec iov[IoRequest::kMaxIov];
    int iovcnt = 0;
    uint64_t done = 0;
    uint64_t total = 0;
    bool finished = false;
  };

  // Prefers an idle ring so that concurrent batches proceed in parallel.
  std::unique_lock<std::mutex> AcquireRing(Ring** out) {
    const size_t n = rings_.size();
    const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
    for (size_t i = 0; i < n; ++i) {
      Ring* r = rings_[(start + i) % n].get();
      std::unique_lock<std::mutex> lock(r->mu, std::try_to_lock);
      if (lock.owns_lock()) {
        *out = r;
        return lock;
      }
    }
    *out = rings_[start].get();
    return std::unique_lock<std::mutex>((*out)->mu);
  }

  void Run(Ring* r, std::span<IoRequest> requests, const DoneFn& done) {
    io_uring* ring = &r->ring;
    std::vector<Work> work(requests.size());
    std::vector<uint32_t> pending;
    pending.reserve(requests.size());
    for (size_t i = requests.size(); i-- > 0;) {
      IoRequest& q = requests[i];
      Work& w = work[i];
      w.iovcnt = q.iovcnt;
      std::memcpy(w.iov, q.iov, sizeof(iovec) * size_t(q.iovcnt));
      w.total = q.length();
      q.result = 0;
      if (w.total == 0) {
        w.finished = true;
        if (done) done(i);
      } else {
        pending.push_back(uint32_t(i));  // popped from the back: in order
      }
    }
    unsigned inflight = 0, prepared = 0;
    std::vector<uint32_t> finished;
    // When each request was first handed to the ring (read_timing()).
    std::vector<int64_t> submitted_ns(requests.size(), 0);
    while (!pending.empty() || inflight > 0) {
      while (!pending.empty() && inflight + prepared < depth_) {
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (sqe == nullptr) break;
        const uint32_t i = pending.back();
        pending.pop_back();
        const IoRequest& q = requests[i];
        Work& w = work[i];
        if (q.op == IoOp::kRead) {
          io_uring_prep_readv(sqe, q.fd, w.iov, unsigned(w.iovcnt),
                              q.offset + w.done);
        } else {
          io_uring_prep_writev(sqe, q.fd, w.iov, unsigned(w.iovcnt),
                               q.offset + w.done);
        }
        io_uring_sqe_set_data64(sqe, i);
        if (submitted_ns[i] == 0) submitted_ns[i] = NowNs();
        ++prepared;
      }
      if (prepared > 0) {
        int ret = io_uring_submit(ring);
        if (ret > 0) {
          inflight += unsigned(ret);
          prepared -= unsigned(ret);
        } else if (ret == 0 && inflight == 0) {
          Recover(r, requests, work, inflight, EIO, done);  // would spin
          return;
        } else if (ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
          Recover(r, requests, work, inflight, -ret, done);
          return;
        } else if (ret < 0 && inflight == 0) {
          continue;  // transient with nothing to reap: try again
        }
      }
      if (inflight == 0) continue;
      io_uring_cqe* cqe = nullptr;
      int ret = io_uring_wait_cqe(ring, &cqe);
      if (ret < 0) {
        if (ret == -EINTR || ret == -EAGAIN) continue;
        Recover(r, requests, work, inflight, -ret, done);
        return;
      }
      // Results are taken off the ring first so that the callback, which
      // may take a while, runs with the ring free for the kernel.
      unsigned head, seen = 0;
      finished.clear();
      io_uring_for_each_cqe(ring, head, cqe) {
        ++seen;
        --inflight;
        const uint32_t i = uint32_t(io_uring_cqe_get_data64(cqe));
        if (Complete(requests, work, i, cqe->res, &pending)) {
          finished.push_back(i);
        }
      }
      io_uring_cq_advance(ring, seen);
      if (!finished.empty()) {
        const int64_t now = NowNs();
        for (uint32_t i : finished) {
          if (requests[i].op == IoOp::kRead && requests[i].result >= 0)
            CountRead(uint64_t(std::max<int64_t>(now - submitted_ns[i], 0)));
        }
      }
      if (done) {
        for (uint32_t i : finished) done(i);
      }
    }
  }

  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Applies one completion; true when request i is now final.
  static bool Complete(std::span<IoRequest> requests, std::vector<Work>& work,
                       uint32_t i, int res, std::vector<uint32_t>* pending) {
    IoRequest& q = requests[i];
    Work& w = work[i];
    if (res == -EINTR || res == -EAGAIN) {
      pending->push_back(i);
      return false;
    }
    if (res < 0) {
      q.result = res;
      w.finished = true;
      return true;
    }
    if (res == 0) {  // end of file: report what was transferred
      q.result = int64_t(w.done);
      w.finished = true;
      return true;
    }
    w.done += uint64_t(res);
    if (w.done >= w.total) {
      q.result = int64_t(w.done);
      w.finished = true;
      return true;
    }
    AdvanceIov(w.iov, &w.iovcnt, uint64_t(res));
    pending->push_back(i);  // short transfer: continue where it stopped
    return false;
  }

  // The ring refused a submission for a reason that retrying will not fix.
  // Requests already in the kernel are waited for (their buffers must stay
  // valid), the ring is rebuilt so that no stale entry is ever submitted
  // later, and the unfinished requests are finished with pread/pwrite.
  void Recover(Ring* r, std::span<IoRequest> requests, std::vector<Work>& work,
               unsigned inflight, int err, const DoneFn& done) {
    spdlog::error("io_uring submission failed ({}); rebuilding the ring",
                  std::strerror(err));
    std::vector<uint32_t> ignored;
    while (inflight > 0) {
      io_uring_cqe* cqe = nullptr;
      int ret = io_uring_wait_cqe(&r->ring, &cqe);
      if (ret == -EINTR) continue;
      if (ret < 0) break;
      const uint32_t i = uint32_t(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&r->ring, cqe);
      --inflight;
      if (Complete(requests, work, i, res, &ignored) && done) done(i);
    }
    io_uring_queue_exit(&r->ring);
    r->live = InitRing(depth_, &r->ring) == 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      Work& w = work[i];
      if (w.finished) continue;
      IoRequest rest = requests[i];
      rest.offset += w.done;
      rest.iovcnt = w.iovcnt;
      std::memcpy(rest.iov, w.iov, sizeof(iovec) * size_t(w.iovcnt));
      fallback_->Submit(std::span<IoRequest>(&rest, 1));
      requests[i].result =
          rest.result < 0 ? rest.result : int64_t(w.done) + rest.result;
      if (done) done(i);
    }
  }

  const unsigned depth_;
  std::vector<std::unique_ptr<Ring>> rings_;
  std::unique_ptr<IoBackend> fallback_;
  std::atomic<size_t> next_{0};
};

}  // namespace

Result<std::unique_ptr<IoBackend>> NewIoUringBackend(unsigned queue_depth,
                                                     unsigned rings) {
  if (queue_depth == 0 || rings == 0) {
    return Status(ErrorCode::INVALID_PARAMS,
                  "io_uring queue depth and ring count must be positive");
  }
  std::vector<std::unique_ptr<IoUringBackend::Ring>> made;
  for (unsigned i = 0; i < rings; ++i) {
    auto r = std::make_unique<IoUringBackend::Ring>();
    int ret = InitRing(queue_depth, &r->ring);
    if (ret < 0) {
      for (auto& m : made) io_uring_queue_exit(&m->ring);
      return Status(ErrorCode::INTERNAL_ERROR,
                    std::string("io_uring_queue_init: ") + std::strerror(-ret));
    }
    r->live = true;
    made.push_back(std::move(r));
  }
  return std::unique_ptr<IoBackend>(
      std::make_unique<IoUringBackend>(queue_depth, std::move(made)));
}

}  // namespace kvpool::storage
