#include "node/dram_directory.h"

#include "storage/record_format.h"

namespace kvpool {

void DramDirectory::ResetSequence() {
  MutexLock lock(&mu_);
  applied_ = 0;
}

uint64_t DramDirectory::applied_seq() const {
  MutexLock lock(&mu_);
  return applied_;
}

void DramDirectory::Apply(
    const google::protobuf::RepeatedPtrField<rpc::DramEvent>& events,
    const Resolver& resolve, const DiskDropper& drop_disk) {
  for (const auto& ev : events) {
    {
      MutexLock lock(&mu_);
      if (ev.seq() <= applied_) continue;
    }
    if (ev.disk_drop()) {
      if (drop_disk) drop_disk(ev);
      MutexLock lock(&mu_);
      applied_ = ev.seq();
      continue;
    }
    auto view = resolve(ev.segment_id());
    // The checksum is taken outside the lock: the bytes cannot change, the
    // master places nothing over a range until its free is applied.
    std::optional<Entry> placed;
    if (view && ev.placed() && ev.size() > 0 &&
        ev.size() <= view->bytes.size() &&
        ev.offset() <= view->bytes.size() - ev.size()) {
      std::optional<uint64_t> noted = TakeNote(view->slot, ev);
      placed = Entry{ev.offset(),
                     ev.size(),
                     ev.version(),
                     noted ? *noted
                           : storage::DataChecksum(
                                 view->bytes.data() + ev.offset(), ev.size()),
                     ev.tenant().empty() ? "default" : ev.tenant(),
                     ev.key()};
    }
    MutexLock lock(&mu_);
    if (view && view->slot >= 0 && view->slot < kSlots) {
      auto& slot = slots_[view->slot];
      if (placed) {
        slot[ev.offset()] = std::move(*placed);
      } else if (!ev.placed()) {
        slot.erase(ev.offset());
      }
    }
    applied_ = ev.seq();
  }
}

std::vector<DramDirectory::Entry> DramDirectory::Verified(
    int slot, std::span<const uint8_t> bytes) {
  std::vector<Entry> out;
  if (slot < 0 || slot >= kSlots) return out;
  {
    MutexLock lock(&mu_);
    out.reserve(slots_[slot].size());
    for (const auto& [off, e] : slots_[slot]) out.push_back(e);
  }
  std::vector<Entry> good;
  good.reserve(out.size());
  std::vector<uint64_t> bad;
  for (auto& e : out) {
    if (e.offset + e.size <= bytes.size() &&
        storage::DataChecksum(bytes.data() + e.offset, e.size) == e.checksum) {
      good.push_back(std::move(e));
    } else {
      bad.push_back(e.offset);
    }
  }
  MutexLock lock(&mu_);
  for (uint64_t off : bad) slots_[slot].erase(off);
  mismatches_ += bad.size();
  return good;
}

void DramDirectory::Forget(int slot, uint64_t offset) {
  if (slot < 0 || slot >= kSlots) return;
  MutexLock lock(&mu_);
  slots_[slot].erase(offset);
}

bool DramDirectory::Overlaps(int slot, uint64_t offset, uint64_t length) const {
  if (slot < 0 || slot >= kSlots || length == 0) return false;
  MutexLock lock(&mu_);
  const auto& m = slots_[slot];
  // The first entry starting at or past `offset` overlaps if it starts
  // before the end; the one before it if it reaches past `offset`.
  auto it = m.lower_bound(offset);
  if (it != m.end() && it->first - offset < length) return true;
  if (it == m.begin()) return false;
  --it;
  return it->first + it->second.size > offset;
}

size_t DramDirectory::size() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& s : slots_) n += s.size();
  return n;
}

uint64_t DramDirectory::checksum_mismatches() const {
  MutexLock lock(&mu_);
  return mismatches_;
}

void DramDirectory::NoteChecksum(int slot, uint64_t offset, uint64_t size,
                                 uint64_t version, const std::string& tenant,
                                 const std::string& key, uint64_t checksum) {
  if (slot < 0 || slot >= kSlots) return;
  MutexLock lock(&mu_);
  auto& notes = notes_[slot];
  // Notes whose placement never came (failed promotions) must not pile
  // up; dropping them all only costs their events a hash.
  if (notes.size() >= kMaxNotes) notes.clear();
  notes[offset] =
      Note{size, version, checksum, tenant.empty() ? "default" : tenant, key};
}

std::optional<uint64_t> DramDirectory::TakeNote(int slot,
                                                const rpc::DramEvent& ev) {
  if (slot < 0 || slot >= kSlots) return std::nullopt;
  MutexLock lock(&mu_);
  auto& notes = notes_[slot];
  auto it = notes.find(ev.offset());
  if (it == notes.end()) return std::nullopt;
  const Note n = std::move(it->second);
  notes.erase(it);  // used or stale: an event for this range came
  if (n.size != ev.size() || n.version != ev.version() || n.key != ev.key() ||
      n.tenant != (ev.tenant().empty() ? "default" : ev.tenant())) {
    return std::nullopt;
  }
  ++notes_used_;
  return n.checksum;
}

uint64_t DramDirectory::noted_checksums_used() const {
  MutexLock lock(&mu_);
  return notes_used_;
}

}  // namespace kvpool
