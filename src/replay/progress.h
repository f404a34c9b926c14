// The replay's progress line on stderr: arm, phase, items done, ETA. On a
// terminal it is rewritten in place (at most every 0.5 s); otherwise a line
// is printed every 10 s, so a log stays short.
#ifndef KVPOOL_REPLAY_PROGRESS_H_
#define KVPOOL_REPLAY_PROGRESS_H_

#include <cstdint>
#include <mutex>
#include <string>

namespace kvpool::replay {

class Progress {
 public:
  explicit Progress(bool enabled = true);
  // A new phase of `arm` (1-based `arm_index` of `arms`) with `total` items
  // of `unit` ("requests", "blocks", ...); 0 = unknown.
  void Phase(int arm_index, int arms, const std::string& arm,
             const std::string& phase, uint64_t total, const std::string& unit);
  // Items done so far in the phase; `eta_sec` < 0 = estimate from the rate.
  void Update(uint64_t done, double eta_sec = -1);
  // Ends the line (a terminal keeps the last state visible).
  void Finish();

 private:
  void PrintLocked(bool force);

  bool enabled_;
  bool tty_;
  std::mutex mu_;
  std::string label_, unit_;
  uint64_t total_ = 0, done_ = 0;
  double phase_start_ = 0, last_print_ = 0, eta_ = -1;
  size_t last_len_ = 0;
};

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_PROGRESS_H_
