#include "common/failpoint.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace kvpool {
namespace failpoint_internal {

std::atomic<bool> any_armed{false};

namespace {

struct Point {
  enum class Action { kCrash, kPause } action = Action::kCrash;
  uint64_t at_pass = 1;  // acts on this pass (1-based), once
  bool every = false;    // ... and on every later one
  int64_t pause_ms = 0;
  uint64_t passes = 0;
};

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, Point>& Points() {
  static auto* points = new std::unordered_map<std::string, Point>();
  return *points;
}

bool Known(std::string_view name) {
  for (const char* n : kFailpointNames) {
    if (name == n) return true;
  }
  return false;
}

// Armed from the environment before main() runs.
const bool kFromEnv = [] {
  const char* spec = std::getenv("KVPOOL_FAILPOINTS");
  if (spec != nullptr && *spec != '\0') {
    Status s = ArmFailpoints(spec);
    if (!s.ok()) {
      std::fprintf(stderr, "KVPOOL_FAILPOINTS: %s\n", s.ToString().c_str());
      std::_Exit(2);
    }
  }
  return true;
}();

}  // namespace

void Hit(std::string_view name) {
  Point p;
  uint64_t pass = 0;
  {
    std::lock_guard<std::mutex> lock(Mu());
    auto it = Points().find(std::string(name));
    if (it == Points().end()) return;
    pass = ++it->second.passes;
    if (pass < it->second.at_pass ||
        (pass > it->second.at_pass && !it->second.every))
      return;
    p = it->second;
  }
  if (p.action == Point::Action::kCrash) {
    // As a power cut or kill -9 would: no destructor, no flush.
    std::fprintf(stderr, "failpoint %.*s: crashing\n", int(name.size()),
                 name.data());
    ::kill(::getpid(), SIGKILL);
  }
  if (!p.every || pass == p.at_pass) {
    spdlog::warn("failpoint {}: pausing {} ms{}", name, p.pause_ms,
                 p.every ? " on every pass from now on" : "");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(p.pause_ms));
}

}  // namespace failpoint_internal

Status ArmFailpoints(const std::string& spec) {
  using failpoint_internal::Point;
  std::unordered_map<std::string, Point> parsed;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return Status(ErrorCode::INVALID_PARAMS, "no '=' in '" + item + "'");
    const std::string name = item.substr(0, eq);
    std::string action = item.substr(eq + 1);
    if (!failpoint_internal::Known(name))
      return Status(ErrorCode::INVALID_PARAMS, "unknown failpoint " + name);
    Point p;
    const size_t at = action.find('@');
    try {
      if (at != std::string::npos) {
        std::string n = action.substr(at + 1);
        if (!n.empty() && n.back() == '+') {
          p.every = true;
          n.pop_back();
        }
        p.at_pass = std::stoull(n);
        action = action.substr(0, at);
      }
      if (action == "crash") {
        p.action = Point::Action::kCrash;
      } else if (action.rfind("pause:", 0) == 0) {
        p.action = Point::Action::kPause;
        p.pause_ms = std::stoll(action.substr(6));
      } else {
        return Status(ErrorCode::INVALID_PARAMS,
                      "action must be crash or pause:MS, got " + action);
      }
    } catch (const std::exception&) {
      return Status(ErrorCode::INVALID_PARAMS, "bad number in '" + item + "'");
    }
    if (p.at_pass == 0 || p.pause_ms < 0)
      return Status(ErrorCode::INVALID_PARAMS, "bad number in '" + item + "'");
    parsed[name] = p;
  }
  std::lock_guard<std::mutex> lock(failpoint_internal::Mu());
  for (auto& [n, p] : parsed) failpoint_internal::Points()[n] = p;
  failpoint_internal::any_armed = !failpoint_internal::Points().empty();
  return Status::OK();
}

void DisarmFailpoints() {
  std::lock_guard<std::mutex> lock(failpoint_internal::Mu());
  failpoint_internal::Points().clear();
  failpoint_internal::any_armed = false;
}

uint64_t FailpointPasses(std::string_view name) {
  std::lock_guard<std::mutex> lock(failpoint_internal::Mu());
  auto it = failpoint_internal::Points().find(std::string(name));
  return it == failpoint_internal::Points().end() ? 0 : it->second.passes;
}

}  // namespace kvpool
