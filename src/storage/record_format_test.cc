// The on-disk checksum must not depend on which XXH3 code path the running
// CPU gets: records written on one machine are read on another.
#include "storage/record_format.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

namespace kvpool::storage {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

TEST(RecordFormat, DataChecksumIsPortableXxh3) {
  // The published XXH3-64 of empty input.
  EXPECT_EQ(DataChecksum(nullptr, 0), 0x2D06800538D394C2ull);
  for (size_t n : {1ul, 16ul, 17ul, 128ul, 129ul, 240ul, 241ul, 1024ul, 4096ul,
                   65536ul + 7, 1ul << 20, (4ul << 20) + 4096}) {
    auto v = RandomBytes(n, uint32_t(n));
    // XXH3_64bits from the library is the scalar/SSE2 reference.
    EXPECT_EQ(DataChecksum(v.data(), n), XXH3_64bits(v.data(), n)) << n;
  }
}

TEST(RecordFormat, StreamingDigestEqualsOneShot) {
  auto v = RandomBytes((3ul << 20) + 12345, 7);
  for (size_t piece : {1ul, 63ul, 4096ul, 256ul << 10, 1ul << 20}) {
    DataHasher h;
    for (size_t a = 0; a < v.size(); a += piece) {
      h.Update(v.data() + a, std::min(piece, v.size() - a));
    }
    EXPECT_EQ(h.Digest(), XXH3_64bits(v.data(), v.size())) << piece;
  }
}

TEST(RecordFormat, ChecksumSeesOneFlippedBit) {
  auto v = RandomBytes(1 << 20, 3);
  const uint64_t before = DataChecksum(v.data(), v.size());
  v[777777] ^= 0x10;
  EXPECT_NE(DataChecksum(v.data(), v.size()), before);
}

}  // namespace
}  // namespace kvpool::storage
