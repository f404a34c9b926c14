#include "master/object_store.h"

namespace kvpool {

uint32_t TenantTable::Intern(const std::string& name) {
  {
    std::shared_lock lock(mu_);
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(ids_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

int64_t TenantTable::Lookup(const std::string& name) const {
  std::shared_lock lock(mu_);
  auto it = ids_.find(name);
  return it == ids_.end() ? -1 : int64_t{it->second};
}

std::string TenantTable::Name(uint32_t id) const {
  std::shared_lock lock(mu_);
  return id < names_.size() ? names_[id] : std::string();
}

size_t ObjectStore::Size() const {
  size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(s.mu));
    n += s.objects.size();
  }
  return n;
}

}  // namespace kvpool
