// The order of WRITEs into a node's segments over the TCP data plane
// (docs/security.md, "Write generations"). The master gives every write
// grant a generation, greater than that of every earlier grant, and signs it
// into the grant's WRITE token. The node records, per segment, the newest
// generation that has written each granted range, and refuses a write whose
// generation is older than one recorded over any byte of its grant: the
// token of a value that is gone (removed or evicted, its range handed to
// another put since) cannot overwrite the value that took the range.
//
// What is recorded is the grant (the range the token names, i.e. the
// replica the master allocated), not the bytes of each op: however a client
// cuts its writes, a grant is one interval, so a client cannot grow the
// record with many small writes. A current grant never overlaps a newer
// one (the master hands a range out again only after freeing it), so this
// refuses no legitimate write.
//
// An admitted write may still be copying its bytes when a newer one of an
// overlapping range is admitted: the newer one waits until such older
// writes have finished (see Pass::blocked and Wait), so that its bytes are
// never mixed with stale ones. Nothing waits otherwise.
//
// Generation 0 (a master from before generations) is not ordered: such a
// write is admitted, recorded nowhere and never waited for.
//
// Memory: the intervals of a segment are disjoint grants (a write replaces
// what its grant covers), so there are at most as many as allocations
// written since the last key change and not covered by a later one; in
// flight, one entry per admitted op of a request being served.
// Thread-safe.
#ifndef KVPOOL_TRANSPORT_WRITE_ORDER_H_
#define KVPOOL_TRANSPORT_WRITE_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvpool {

class WriteOrder {
 public:
  struct Op {
    uint64_t segment_id = 0;
    // The bytes the op copies: > 0 long, inside the grant.
    uint64_t offset = 0;
    uint64_t length = 0;
    // The range the op's token grants, and its write generation.
    uint64_t grant_offset = 0;
    uint64_t grant_length = 0;
    uint64_t generation = 0;
    bool admitted = false;  // out
  };

  // The ordered writes of one request that Admit let through, in flight
  // until the pass is released (or destroyed): writes admitted later that
  // overlap them with a newer generation wait until then.
  class Pass {
   public:
    Pass() = default;
    Pass(Pass&& other) noexcept { *this = std::move(other); }
    Pass& operator=(Pass&& other) noexcept;
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    ~Pass() { Release(); }
    // Whether older overlapping writes were still in flight when this pass
    // was admitted: then call Wait before copying. False in the normal case.
    bool blocked() const { return blocked_; }
    // Ends the pass: its writes have landed (or will never land).
    void Release();

   private:
    friend class WriteOrder;
    WriteOrder* order_ = nullptr;
    uint64_t seq_ = 0;
    bool blocked_ = false;
  };

  WriteOrder() = default;
  WriteOrder(const WriteOrder&) = delete;
  WriteOrder& operator=(const WriteOrder&) = delete;

  // Checks the ops of one request and records the admitted ones, all under
  // one lock. Each op's `admitted` says whether it may be written: false
  // when a newer generation than its own has written any byte of its
  // grant. An admitted op records its whole grant with its generation.
  // `epoch` names the capability key the ops' tokens verified under (see
  // Rekey): ops of an epoch older than the current one are admitted without
  // being ordered (they were checked under a key that has since gone).
  Pass Admit(uint64_t epoch, std::span<Op> ops);

  // For a blocked pass: false if nothing is left to wait for (`resume` is
  // not called), else true, and `resume` is called once, without locks
  // held, by whoever finishes the last older write it waits for (unless
  // DropWaiters discards it first).
  bool Wait(const Pass& pass, std::function<void()> resume);

  // A new capability key (`epoch`, increasing): the generations recorded
  // under the old one mean nothing under the new one (a new master numbers
  // its own), so every record is forgotten. Writes in flight stay in flight.
  void Rekey(uint64_t epoch);

  // Destroys every stored `resume` without calling it (a server stopping:
  // the sessions waiting are being torn down).
  void DropWaiters();

  // Recorded intervals, over all segments (tests).
  size_t interval_count() const;

 private:
  struct Interval {
    uint64_t end = 0;
    uint64_t generation = 0;
  };
  struct InFlight {
    uint64_t seq = 0;
    uint64_t offset = 0;
    uint64_t end = 0;
    uint64_t generation = 0;
  };
  struct Segment {
    std::map<uint64_t, Interval> intervals;  // by offset, disjoint
    std::vector<InFlight> in_flight;
  };

  static bool NewerOverlaps(const Segment& s, uint64_t offset, uint64_t end,
                            uint64_t generation);
  static void Record(Segment* s, uint64_t offset, uint64_t end,
                     uint64_t generation);
  void Release(uint64_t seq);
  // Under mu_: drops every interval (and every segment with nothing in
  // flight) and moves to `epoch`.
  void ForgetRecords(uint64_t epoch);

  mutable std::mutex mu_;
  uint64_t epoch_ = 0;
  uint64_t next_seq_ = 1;
  std::unordered_map<uint64_t, Segment> segments_;
  // Per pass with writes in flight: the segments they are in.
  std::unordered_map<uint64_t, std::vector<uint64_t>> passes_;
  // Per blocked pass: the passes it still waits for (never empty).
  std::unordered_map<uint64_t, std::vector<uint64_t>> blockers_;
  // Per blocked pass that called Wait: how to resume it.
  std::unordered_map<uint64_t, std::function<void()>> waiters_;
};

}  // namespace kvpool

#endif  // KVPOOL_TRANSPORT_WRITE_ORDER_H_
