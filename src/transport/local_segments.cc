#include "transport/local_segments.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "common/mutex.h"

namespace kvpool {

namespace {
struct Registry {
  Mutex mu;
  std::unordered_map<std::string, std::weak_ptr<const ShmSegment>> by_path
      ABSL_GUARDED_BY(mu);
  std::map<std::pair<std::string, uint64_t>, std::weak_ptr<const ShmSegment>>
      views ABSL_GUARDED_BY(mu);
};
Registry& Segments() {
  static auto* r = new Registry();  // never destroyed: used at exit
  return *r;
}
}  // namespace

void PublishLocalSegment(const std::shared_ptr<const ShmSegment>& seg) {
  if (!seg) return;
  Registry& r = Segments();
  MutexLock lock(&r.mu);
  r.by_path[seg->path()] = seg;
}

void WithdrawLocalSegment(const ShmSegment* seg) {
  if (seg == nullptr) return;
  Registry& r = Segments();
  MutexLock lock(&r.mu);
  auto it = r.by_path.find(seg->path());
  if (it == r.by_path.end()) return;
  auto live = it->second.lock();
  // Only this segment's own entry (or one whose segment is already gone).
  if (!live || live.get() == seg) r.by_path.erase(it);
}

std::shared_ptr<const ShmSegment> FindLocalSegment(const std::string& path,
                                                   uint64_t size) {
#if defined(__SANITIZE_THREAD__)
  // A client's copy and a node thread's later use of the same bytes are
  // ordered by the protocol through sockets (a put's end at the master,
  // then the offload task in the node's heartbeat), which TSan does not
  // model: through one shared mapping it would report every such pair as a
  // race between two kvpool accesses (docs/sanitizers.md). TSan builds keep
  // a mapping per client, as between processes.
  (void)path;
  (void)size;
  return nullptr;
#endif
  Registry& r = Segments();
  MutexLock lock(&r.mu);
  auto it = r.by_path.find(path);
  if (it == r.by_path.end()) return nullptr;
  auto seg = it->second.lock();
  if (!seg) {
    r.by_path.erase(it);
    return nullptr;
  }
  return seg->size() == size ? seg : nullptr;
}

Result<std::shared_ptr<const ShmSegment>> SharedView(const std::string& path,
                                                     uint64_t segment_id,
                                                     uint64_t size) {
#if defined(__SANITIZE_THREAD__)
  // As FindLocalSegment: two clients' copies through one mapping are
  // ordered by the protocol, which TSan does not see.
  (void)segment_id;
  auto own = ShmSegment::Open(path, size);
  if (!own.ok()) return own.status();
  return std::shared_ptr<const ShmSegment>(std::move(own.value()));
#endif
  Registry& r = Segments();
  MutexLock lock(&r.mu);
  auto key = std::make_pair(path, segment_id);
  if (auto it = r.views.find(key); it != r.views.end()) {
    if (auto seg = it->second.lock(); seg && seg->size() == size) return seg;
  }
  // Under the lock: two clients asking at once must not map it twice.
  auto opened = ShmSegment::Open(path, size);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const ShmSegment> seg(std::move(opened.value()));
  std::erase_if(r.views, [](const auto& v) { return v.second.expired(); });
  r.views[std::move(key)] = seg;
  return seg;
}

}  // namespace kvpool
