// Test-only IoBackend that wraps a real one and fails chosen requests: an
// error such as EIO or ENOSPC, a torn write (a prefix lands, the rest does
// not), or a read error. Faults are armed for "the n-th next write/read".
#ifndef KVPOOL_STORAGE_FAULT_BACKEND_H_
#define KVPOOL_STORAGE_FAULT_BACKEND_H_

#include <errno.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "storage/io_backend.h"

namespace kvpool::storage {

class FaultBackend : public IoBackend {
 public:
  explicit FaultBackend(std::unique_ptr<IoBackend> inner)
      : inner_(std::move(inner)) {}

  std::string_view name() const override { return inner_->name(); }
  bool is_io_uring() const override { return inner_->is_io_uring(); }

  // The write after `skip` more writes fails with -err; nothing is written.
  void FailWrite(int err, int skip = 0) { Arm(&writes_, skip, {err, 0}); }
  // The write after `skip` more writes stores only its first `keep` bytes
  // (a multiple of 4096) and reports a short transfer, as a crash or a full
  // device would leave it.
  void TearWrite(uint64_t keep, int skip = 0) {
    Arm(&writes_, skip, {0, keep});
  }
  // The read after `skip` more reads fails with -err.
  void FailRead(int err, int skip = 0) { Arm(&reads_, skip, {err, 0}); }

  int writes_seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return writes_seen_;
  }

  using IoBackend::Submit;
  void Submit(std::span<IoRequest> requests, const DoneFn& done) override {
    std::vector<IoRequest*> pass;
    std::vector<size_t> failed;
    std::vector<std::pair<IoRequest*, uint64_t>> torn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (IoRequest& r : requests) {
        const bool write = r.op == IoOp::kWrite;
        if (write) ++writes_seen_;
        Fault f = Next(write ? &writes_ : &reads_);
        if (f.err != 0) {
          r.result = -f.err;
          failed.push_back(size_t(&r - requests.data()));
        } else if (f.keep != 0) {
          torn.push_back({&r, f.keep});
        } else {
          pass.push_back(&r);
        }
      }
    }
    std::vector<IoRequest> run;
    for (IoRequest* r : pass) run.push_back(*r);
    for (auto& [r, keep] : torn) {
      IoRequest cut = *r;
      cut.iovcnt = 0;
      uint64_t left = keep;
      for (int i = 0; i < r->iovcnt && left > 0; ++i) {
        const uint64_t n = std::min<uint64_t>(left, r->iov[i].iov_len);
        cut.Add(r->iov[i].iov_base, n);
        left -= n;
      }
      run.push_back(cut);
    }
    if (done) {
      for (size_t i : failed) done(i);
    }
    inner_->Submit(run, [&](size_t k) {
      IoRequest* orig = k < pass.size() ? pass[k] : torn[k - pass.size()].first;
      orig->result = run[k].result;
      if (done) done(size_t(orig - requests.data()));
    });
  }

 private:
  struct Fault {
    int err = 0;
    uint64_t keep = 0;
  };
  // Slot k of the queue is the fault of the k-th next request (none if
  // both fields are zero).
  void Arm(std::deque<Fault>* q, int skip, Fault f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q->size() <= size_t(skip)) q->resize(size_t(skip) + 1);
    (*q)[size_t(skip)] = f;
  }
  static Fault Next(std::deque<Fault>* q) {
    if (q->empty()) return {};
    Fault f = q->front();
    q->pop_front();
    return f;
  }

  std::unique_ptr<IoBackend> inner_;
  mutable std::mutex mu_;
  std::deque<Fault> writes_;
  std::deque<Fault> reads_;
  int writes_seen_ = 0;
};

}  // namespace kvpool::storage

#endif  // KVPOOL_STORAGE_FAULT_BACKEND_H_
