// Must NOT compile under scripts/thread_safety.sh: it writes a guarded
// member without its lock, and reads one in a function that claims the lock
// without taking it. The script fails if clang accepts this file, so a
// build that silently lost -Wthread-safety (or a Mutex that lost its
// attributes) cannot pass for checked.
#include "common/mutex.h"

namespace kvpool {

class Counter {
 public:
  void Bump() { ++count_; }  // error: writing count_ requires holding mu_
  int ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_; }
  int Read() { return ReadLocked(); }  // error: calling needs mu_ held

 private:
  Mutex mu_;
  int count_ ABSL_GUARDED_BY(mu_) = 0;
};

int Use() {
  Counter c;
  c.Bump();
  return c.Read();
}

}  // namespace kvpool
