#include "common/malloc_tuning.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <vector>

namespace kvpool {
namespace {

// After the call, a burst of small frees leaves nothing in fastbins (the
// chunks a later large request would have to merge all at once).
TEST(MallocTuningTest, SmallFreesLeaveNoFastbinChunks) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's";
#endif
#endif
  ASSERT_TRUE(ConfigureMallocForMaster());
  // Other arenas (other tests' threads) may hold fastbin chunks freed
  // before the call: only growth counts.
  const size_t before = mallinfo2().fsmblks;
  std::vector<void*> chunks;
  for (int i = 0; i < 100000; ++i) chunks.push_back(std::malloc(100));
  // Every other one: no two freed chunks are neighbours, so only fastbins
  // (not merging) could hold them apart from the rest of the heap.
  for (size_t i = 0; i < chunks.size(); i += 2) std::free(chunks[i]);
  EXPECT_LE(mallinfo2().fsmblks, before);
  for (size_t i = 1; i < chunks.size(); i += 2) std::free(chunks[i]);
}

}  // namespace
}  // namespace kvpool
