// Deadline-aware router prefetch: the hand-out filter that drops promotions
// whose deadline passed before their SSD read could start, and the mailbox
// copies of those their holder's exist trigger already runs. The decision and
// the release of such an entry are PromotionScheduler's; the mailbox order
// itself is NodeRegistry's (a DeadlineQueue per holder).
#include <algorithm>

#include "master/master_service.h"

namespace kvpool {

size_t MasterService::DropExpiredPromotions(
    std::vector<PromotionTaskMsg>* tasks) {
  const int64_t now = clock_->NowMs();
  size_t dropped = 0;
  auto keep = tasks->begin();
  for (auto& t : *tasks) {
    bool expired = false;
    ObjectKeyView kv;
    // Only router tasks expire or are claimed by an exist trigger.
    if ((t.deadline_ms > 0 || t.source == TriggerSource::kRouter) &&
        LookupKey(t.tenant, t.key, &kv)) {
      auto& shard = objects_.ShardFor(kv);
      MutexLock lock(&shard.mu());
      expired = promotions_.HandOut(shard, kv, now, t) !=
                PromotionScheduler::HandOutResult::kDeliver;
    }
    if (expired) {
      ++dropped;
    } else {
      if (&*keep != &t) *keep = std::move(t);
      ++keep;
    }
  }
  tasks->erase(keep, tasks->end());
  return dropped;
}

}  // namespace kvpool
