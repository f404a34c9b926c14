#include "replay/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "replay/clock_util.h"

namespace kvpool::replay {

Progress::Progress(bool enabled)
    : enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::Phase(int arm_index, int arms, const std::string& arm,
                     const std::string& phase, uint64_t total,
                     const std::string& unit) {
  std::lock_guard<std::mutex> lock(mu_);
  label_ = arms > 0 ? fmt::format("[{}/{} {}] {}", arm_index, arms, arm, phase)
                    : fmt::format("[{}] {}", arm, phase);
  unit_ = unit;
  total_ = total;
  done_ = 0;
  eta_ = -1;
  phase_start_ = NowSec();
  PrintLocked(true);
}

void Progress::Update(uint64_t done, double eta_sec) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = done;
  eta_ = eta_sec;
  PrintLocked(false);
}

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_) return;
  PrintLocked(true);
  if (tty_) std::fputc('\n', stderr);
  last_len_ = 0;
}

void Progress::PrintLocked(bool force) {
  if (!enabled_) return;
  const double now = NowSec();
  if (!force && now - last_print_ < (tty_ ? 0.5 : 10.0)) return;
  last_print_ = now;
  const double elapsed = now - phase_start_;
  double eta = eta_;
  if (eta < 0 && total_ > 0 && done_ > 0) {
    eta = elapsed / double(done_) * double(total_ - std::min(done_, total_));
  }
  std::string line = label_;
  if (total_ > 0) {
    line += fmt::format(" {}/{} {}", done_, total_, unit_);
  } else if (done_ > 0) {
    line += fmt::format(" {} {}", done_, unit_);
  }
  line += fmt::format(", {:.0f} s", elapsed);
  if (eta >= 0) line += fmt::format(", ETA {:.0f} s", eta);
  if (tty_) {
    std::string pad(last_len_ > line.size() ? last_len_ - line.size() : 0, ' ');
    std::fprintf(stderr, "\r%s%s", line.c_str(), pad.c_str());
    last_len_ = line.size();
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace kvpool::replay
