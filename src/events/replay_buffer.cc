#include "events/replay_buffer.h"

#include <algorithm>
#include <utility>

namespace kvpool::events {

void ReplayBuffer::Add(uint64_t seq,
                       std::shared_ptr<const std::string> payload) {
  if (capacity_ == 0) return;
  if (entries_.size() >= capacity_) entries_.pop_front();
  entries_.push_back(Entry{seq, std::move(payload)});
}

std::vector<ReplayBuffer::Entry> ReplayBuffer::From(uint64_t from) const {
  auto first =
      std::lower_bound(entries_.begin(), entries_.end(), from,
                       [](const Entry& e, uint64_t s) { return e.seq < s; });
  return std::vector<Entry>(first, entries_.end());
}

}  // namespace kvpool::events
