#include "transport/local_holders.h"

#include <mutex>
#include <unordered_map>

namespace kvpool {

namespace {
std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, std::weak_ptr<LocalHolder>>& Holders() {
  static auto* holders =
      new std::unordered_map<std::string, std::weak_ptr<LocalHolder>>();
  return *holders;
}
}  // namespace

void RegisterLocalHolder(const std::string& node_id,
                         std::weak_ptr<LocalHolder> holder) {
  std::lock_guard<std::mutex> lock(Mu());
  Holders()[node_id] = std::move(holder);
}

void UnregisterLocalHolder(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(Mu());
  Holders().erase(node_id);
}

std::shared_ptr<LocalHolder> FindLocalHolder(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(Mu());
  auto it = Holders().find(node_id);
  return it == Holders().end() ? nullptr : it->second.lock();
}

}  // namespace kvpool
