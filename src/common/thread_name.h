// Names the calling thread (at most 15 characters are kept), so per-thread
// CPU accounting (the replay's, top -H, perf) can tell the components apart.
#ifndef KVPOOL_COMMON_THREAD_NAME_H_
#define KVPOOL_COMMON_THREAD_NAME_H_

#include <pthread.h>

namespace kvpool {

inline void SetThreadName(const char* name) {
  pthread_setname_np(pthread_self(), name);
}

}  // namespace kvpool

#endif  // KVPOOL_COMMON_THREAD_NAME_H_
