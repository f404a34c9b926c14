#include "ha/leader_election.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace kvpool::ha {

std::string LeaderKey(const std::string& cluster_id) {
  return "/kvpool/" + cluster_id + "/master";
}

Result<std::optional<LeaderInfo>> FindLeader(EtcdClient* etcd,
                                             const std::string& key) {
  auto kv = etcd->Get(key);
  if (!kv.ok()) return kv.status();
  if (!kv.value()) return std::optional<LeaderInfo>();
  return std::optional<LeaderInfo>(LeaderInfo{
      kv.value()->value, static_cast<uint64_t>(kv.value()->create_revision)});
}

LeaderElection::LeaderElection(EtcdClient* etcd, ElectionConfig config)
    : etcd_(etcd), config_(std::move(config)) {}

LeaderElection::~LeaderElection() { StopRenewing(); }

int64_t LeaderElection::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool LeaderElection::Held() const {
  int64_t until = held_until_ms_.load(std::memory_order_acquire);
  while (until != 0) {
    if (NowMs() < until) return true;
    // A lapse is final once anyone has seen it: a keep-alive answered late
    // must not make a leader that already stopped (and told its callers so)
    // lead again. Zeroing it wins against the renewer's forward-only CAS; if
    // the renewer extended first, nobody saw the lapse and the new time holds.
    if (held_until_ms_.compare_exchange_weak(
            until, 0, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return false;
    }
  }
  return false;
}

Result<uint64_t> LeaderElection::Campaign(
    const std::atomic<bool>* stop,
    const std::function<void(const LeaderInfo&)>& on_standby) {
  StopRenewing();
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_ = false;
    stop_renewing_ = false;
  }
  LeaderInfo seen;
  bool logged_unreachable = false;
  while (!stop->load()) {
    auto current = FindLeader(etcd_, config_.key);
    if (!current.ok()) {
      if (!logged_unreachable) {
        spdlog::warn("election: {}", current.status().ToString());
        logged_unreachable = true;
      }
    } else if (current.value()) {
      logged_unreachable = false;
      const LeaderInfo& l = *current.value();
      if (l.epoch != seen.epoch) {
        seen = l;
        if (on_standby) on_standby(l);
      }
    } else {
      logged_unreachable = false;
      // No leader: try to become it.
      const int64_t sent_ms = NowMs();
      auto grant = etcd_->GrantLease(config_.lease_ttl_s);
      if (grant.ok()) {
        auto created =
            etcd_->CreateIfAbsent(config_.key, config_.value, grant.value().id);
        if (created.ok() && created.value().created) {
          granted_ttl_s_ = grant.value().ttl_s;
          lease_id_.store(grant.value().id);
          epoch_.store(static_cast<uint64_t>(created.value().revision),
                       std::memory_order_release);
          held_until_ms_.store(
              sent_ms + static_cast<int64_t>(granted_ttl_s_ * 1000 *
                                             (1.0 - config_.clock_margin)),
              std::memory_order_release);
          renewer_ =
              std::thread([this, id = grant.value().id] { RenewLoop(id); });
          return epoch_.load();
        }
        // Someone else won (or the call failed): our lease is of no use.
        (void)etcd_->Revoke(grant.value().id);
        continue;  // read the winner at once
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(config_.poll_interval_ms));
  }
  return Status(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS, "campaign stopped");
}

void LeaderElection::RenewLoop(int64_t lease_id) {
  // Three renewals per TTL: one lost keep-alive never ends the leadership.
  const auto period = std::chrono::milliseconds(
      std::max<int64_t>(50, granted_ttl_s_ * 1000 / 3));
  const int64_t keep_ms = static_cast<int64_t>(granted_ttl_s_ * 1000 *
                                               (1.0 - config_.clock_margin));
  std::string last_error;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, period, [this] { return stop_renewing_; })) {
        return;
      }
    }
    if (!Held()) {
      Lose("lease not renewed in time" +
           (last_error.empty() ? "" : " (" + last_error + ")"));
      return;
    }
    const int64_t sent_ms = NowMs();
    auto ttl = etcd_->KeepAlive(lease_id);
    if (ttl.ok()) {
      last_error.clear();
      // Only ever forward: a slow reply must not shorten what a faster one
      // already proved. Never past what this renewal proves, either.
      const int64_t until = sent_ms + keep_ms;
      int64_t cur = held_until_ms_.load();
      while (cur != 0 && until > cur &&
             !held_until_ms_.compare_exchange_weak(cur, until)) {
      }
    } else if (ttl.status().code() == ErrorCode::OBJECT_NOT_FOUND) {
      Lose(ttl.status().message());
      return;
    } else {
      last_error = ttl.status().message();
    }
  }
}

void LeaderElection::Lose(const std::string& why) {
  held_until_ms_.store(0, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_) return;
    lost_ = true;
  }
  cv_.notify_all();
  spdlog::warn("election: leadership of epoch {} lost: {}", epoch(), why);
}

bool LeaderElection::WaitLost(const std::atomic<bool>* stop) {
  // Held() ends by the clock, before the renewer notices (it may be
  // blocked on an unanswered keep-alive): wake for that time too.
  std::unique_lock<std::mutex> lock(mu_);
  while (!lost_ && Held() && !stop->load()) {
    const int64_t left = held_until_ms_.load() - NowMs();
    cv_.wait_for(
        lock, std::chrono::milliseconds(std::clamp<int64_t>(left + 1, 1, 100)));
  }
  return lost_ || !Held();
}

void LeaderElection::Resign(const std::string& why) {
  const bool was_leading = held_until_ms_.load() != 0;
  Lose(why);
  StopRenewing();
  const int64_t id = lease_id_.exchange(0);
  // Best effort: when etcd cannot be reached the lease ends by its TTL.
  if (was_leading && id != 0) (void)etcd_->Revoke(id);
}

void LeaderElection::StopRenewing() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_renewing_ = true;
  }
  cv_.notify_all();
  if (renewer_.joinable() && renewer_.get_id() != std::this_thread::get_id()) {
    renewer_.join();
  }
}

}  // namespace kvpool::ha
