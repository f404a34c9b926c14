// SSD reads of this holder that are in flight, which another reader of the
// same key may join instead of reading the disk a second time. SsdTier keeps
// two: promotion reads, which gets join, and gets' reads of keys a queued
// promotion wants, which that promotion joins.
//
// SharedReads covers one order: a get's read has ended and a queued
// promotion takes its bytes. These cover the two where both reads would be
// on the disk at once:
//  - the router triggers a promotion at routing, the holder starts reading
//    it at once (its queue is earliest deadline first), and the engine's get
//    of the same block arrives while that read is on the disk;
//  - a get reads a batch of blocks while the holder's worker comes to the
//    promotions queued for those same blocks one by one.
// Without them both read (docs/results/README.md, "throttled-takeover":
// 17.3 k disk reads against 12.9 k).
//
// A reader enrolls (Enroll) while a read of its key is in flight, and then
// waits (Await) at most `max_wait` for that read to end. When it does
// (End), the verified bytes are copied into every enrolled reader whose
// length and record version match; any other (a failed read, a different
// length or version, or past its wait) reads the disk itself, as before. A
// reader that gives up is removed before Await returns, so End never writes
// into a buffer its reader has left. Thread-safe.
#ifndef KVPOOL_NODE_IN_FLIGHT_READS_H_
#define KVPOOL_NODE_IN_FLIGHT_READS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace kvpool {

class InFlightReads {
 public:
  struct Stats {
    uint64_t joined = 0;    // gets served from a promotion's read
    uint64_t missed = 0;    // enrolled, then read the disk themselves
    uint64_t timeouts = 0;  // of those: the wait ran out
  };
  class Waiter;

  // enabled == false: Enroll never enrolls, Begin and End do nothing.
  InFlightReads(bool enabled, std::chrono::milliseconds max_wait);
  InFlightReads(const InFlightReads&) = delete;
  InFlightReads& operator=(const InFlightReads&) = delete;
  ~InFlightReads();

  bool enabled() const { return enabled_; }

  // A read of (tenant, key) starts / has ended. `bytes` are the verified
  // value read from record `version`; empty when the read failed. Every
  // Begin is followed by one End, which returns how many enrolled readers it
  // filled.
  void Begin(std::string_view tenant, std::string_view key);
  size_t End(std::string_view tenant, std::string_view key, uint64_t version,
             std::span<const uint8_t> bytes);

  // Whether a read of the key is in flight now (a hint: it may end before
  // Enroll).
  bool Reading(std::string_view tenant, std::string_view key) const;
  // A reader that wants `length` bytes of record `version` into `dest`: null
  // when no read of the key is in flight (read it yourself).
  std::shared_ptr<Waiter> Enroll(std::string_view tenant, std::string_view key,
                                 uint64_t version, uint8_t* dest,
                                 uint64_t length);
  // True once `dest` holds the bytes; false (after at most max_wait) when the
  // get must read the disk itself. Call once per enrolled waiter.
  bool Await(const std::shared_ptr<Waiter>& waiter);

  Stats stats() const;

 private:
  struct Entry {
    int readers = 0;
    std::vector<std::shared_ptr<Waiter>> waiters;
  };

  const bool enabled_;
  const std::chrono::milliseconds max_wait_;
  mutable Mutex mu_;
  CondVar cv_;
  std::unordered_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_IN_FLIGHT_READS_H_
