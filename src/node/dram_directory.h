// A holder's record of the COMPLETE replicas in its DRAM segments, so that
// a master that restarted (or that declared this node dead) can take them
// back instead of losing them. The master feeds it (rpc::DramEvent, in
// sequence) and reuses a freed range only after this directory has applied
// the free; a checksum taken when a replica is placed guards against
// anything else having written the range since (a late write, a bug): a
// replica whose bytes changed is never re-registered.
//
// Segments are named by slot (this node's main segment, its prefetch
// buffer) rather than by the master's segment id, which changes with every
// mount. Thread-safe.
#ifndef KVPOOL_NODE_DRAM_DIRECTORY_H_
#define KVPOOL_NODE_DRAM_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "kvpool.pb.h"

namespace kvpool {

class DramDirectory {
 public:
  static constexpr int kSlots = 2;  // 0: main segment, 1: prefetch buffer

  struct Entry {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t version = 0;
    uint64_t checksum = 0;
    std::string tenant;
    std::string key;
  };
  // Where the master's segment id lives here: a slot and its bytes.
  struct SlotView {
    int slot = 0;
    std::span<const uint8_t> bytes;
  };
  using Resolver = std::function<std::optional<SlotView>(uint64_t segment_id)>;
  // Deletes the SSD record an event names (rpc::DramEvent::disk_drop).
  using DiskDropper = std::function<void(const rpc::DramEvent&)>;

  // A new mount starts a new event sequence (the directory's entries stay).
  void ResetSequence();
  // Every event up to here is applied.
  uint64_t applied_seq() const;
  // Applies events in sequence order; an event at or below applied_seq() (a
  // hand-over sent again) is skipped. Events naming a segment `resolve` does
  // not know, or a range outside it, count as applied and change nothing.
  // A disk drop goes to `drop_disk` (in sequence with the rest).
  void Apply(const google::protobuf::RepeatedPtrField<rpc::DramEvent>& events,
             const Resolver& resolve, const DiskDropper& drop_disk = nullptr);
  // The slot's entries in offset order whose bytes in `bytes` still match
  // their checksum; the others are dropped here (and counted).
  std::vector<Entry> Verified(int slot, std::span<const uint8_t> bytes);
  // True if [offset, offset+length) of the slot overlaps a COMPLETE replica
  // the directory holds. No put or promotion ever writes into one (the
  // master reuses a range only after this directory applied its free), so
  // a WRITE that would is refused: its token outlived its put.
  bool Overlaps(int slot, uint64_t offset, uint64_t length) const;
  // The master refused the entry at `offset`: it is no longer held.
  void Forget(int slot, uint64_t offset);
  // This node just wrote the value of tenant/key (that object version),
  // whose XXH3-64 it verified
  // (a promotion's SSD read), at [offset, offset + size) of the slot. The
  // placement event for that range and key then takes this checksum
  // instead of hashing the bytes again; any other event for the range
  // drops it. At most kMaxNotes are kept per slot (past that they are all
  // dropped, and their events hash as usual).
  void NoteChecksum(int slot, uint64_t offset, uint64_t size, uint64_t version,
                    const std::string& tenant, const std::string& key,
                    uint64_t checksum);
  static constexpr size_t kMaxNotes = 65536;
  size_t size() const;
  uint64_t checksum_mismatches() const;
  // Placement events that took a noted checksum instead of hashing.
  uint64_t noted_checksums_used() const;

 private:
  struct Note {
    uint64_t size = 0;
    uint64_t version = 0;
    uint64_t checksum = 0;
    std::string tenant;
    std::string key;
  };
  // The noted checksum for this placement, taken out; nullopt if none.
  std::optional<uint64_t> TakeNote(int slot, const rpc::DramEvent& ev);

  mutable Mutex mu_;
  uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> slots_[kSlots] ABSL_GUARDED_BY(mu_);  // by offset
  uint64_t mismatches_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Note> notes_[kSlots] ABSL_GUARDED_BY(mu_);  // by offset
  uint64_t notes_used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kvpool

#endif  // KVPOOL_NODE_DRAM_DIRECTORY_H_
