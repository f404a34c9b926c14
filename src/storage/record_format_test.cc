// The on-disk checksum must not depend on which XXH3 code path the running
// CPU gets: records written on one machine are read on another. And the
// header block of each format version reads back as documented.
#include "storage/record_format.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/storage_test_util.h"

namespace kvpool::storage {
namespace {

using testing::HandHeader;
using testing::HandHeaderBlock;

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

RecordHeader SomeHeader() {
  RecordHeader h;
  h.kind = static_cast<uint16_t>(RecordKind::kData);
  h.file_id = 7;
  h.offset = 8192;
  h.seq = 42;
  h.value_len = 5;
  h.data_checksum = 99;
  return h;
}

TEST(RecordFormat, V2HeaderCarriesTheObjectVersionAfterTheNames) {
  std::vector<uint8_t> b(kBlockSize);
  EncodeHeaderBlock(SomeHeader(), "ten", "key", 0x0102030405060708ull,
                    b.data());
  uint16_t version = 0;
  std::memcpy(&version, &b[8], sizeof(version));
  EXPECT_EQ(version, 2);
  // Little-endian, right after tenant (3) and key (3); zeros after it.
  const std::vector<uint8_t> le = {8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 70, b.begin() + 78), le);
  EXPECT_EQ(b[78], 0);

  auto p = ParseHeaderBlock(b.data(), 7, 8192);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->header.version, kFormatVersion);
  EXPECT_EQ(p->tenant, "ten");
  EXPECT_EQ(p->key, "key");
  EXPECT_EQ(p->object_version, 0x0102030405060708ull);
  EXPECT_EQ(p->header.seq, 42u);

  // The header image at another place is a copy, not a record.
  auto moved = ParseHeaderBlock(b.data(), 7, 0);
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.status().message().find("belongs to file 7"),
            std::string::npos);
  // The header checksum covers the object version.
  b[73] ^= 0x01;
  auto flipped = ParseHeaderBlock(b.data(), 7, 8192);
  ASSERT_FALSE(flipped.ok());
  EXPECT_NE(flipped.status().message().find("header checksum"),
            std::string::npos);
}

TEST(RecordFormat, V1HeaderBlockReadsWithObjectVersionZero) {
  HandHeader h;
  h.tenant = "ten";
  h.key = "key";
  h.file_id = 3;
  h.offset = 4096;
  h.seq = 17;
  h.value_len = 123;
  h.data_checksum = 0xABCDEF;
  std::vector<uint8_t> b = HandHeaderBlock(h);
  // A v1 block has no object version: bytes after the names are padding.
  auto p = ParseHeaderBlock(b.data(), 3, 4096);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->header.version, kFormatVersionV1);
  EXPECT_EQ(p->kind(), RecordKind::kData);
  EXPECT_EQ(p->tenant, "ten");
  EXPECT_EQ(p->key, "key");
  EXPECT_EQ(p->object_version, 0u);
  EXPECT_EQ(p->header.seq, 17u);
  EXPECT_EQ(p->header.value_len, 123u);
  EXPECT_EQ(p->header.data_checksum, 0xABCDEFu);
  EXPECT_FALSE(ParseHeaderBlock(b.data(), 4, 4096).ok());

  // v1 names may fill the whole rest of the block...
  const std::string key(kMaxTenantPlusKeyV1 - 3, 'k');
  h.key = key;
  // Named: p's views point into the block (a temporary would be freed
  // before they are read; ASan).
  const auto full = HandHeaderBlock(h);
  p = ParseHeaderBlock(full.data(), 3, 4096);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->key, key);
  // ...but not more.
  const std::string longer(kMaxTenantPlusKeyV1 - 2, 'k');
  h.key = longer;
  auto bad = ParseHeaderBlock(HandHeaderBlock(h).data(), 3, 4096);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key length"), std::string::npos);

  h.key = "key";
  h.version = 3;
  bad = ParseHeaderBlock(HandHeaderBlock(h).data(), 3, 4096);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("format version 3"), std::string::npos);
}

TEST(RecordFormat, V2NamesAreEightBytesShorter) {
  EXPECT_EQ(kMaxTenantPlusKeyV1, 4032u);
  EXPECT_EQ(kMaxTenantPlusKey, 4024u);
  std::vector<uint8_t> b(kBlockSize);
  const std::string longest(kMaxTenantPlusKey - 1, 'k');
  EncodeHeaderBlock(SomeHeader(), "t", longest, ~0ull, b.data());
  auto p = ParseHeaderBlock(b.data(), 7, 8192);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->header.version, kFormatVersion);
  EXPECT_EQ(p->key, longest);
  EXPECT_EQ(p->object_version, ~0ull);

  // A v2 header whose names leave no room for the object version.
  HandHeader h;
  h.version = 2;
  h.tenant = "t";
  const std::string too_long(kMaxTenantPlusKey, 'k');
  h.key = too_long;
  auto bad = ParseHeaderBlock(HandHeaderBlock(h).data(), 1, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key length"), std::string::npos);
}

// A v1 record whose names need the bytes v2 gives the object version stays
// v1 when it is moved or marked dead.
TEST(RecordFormat, LongV1NamesAreEncodedAsV1) {
  std::vector<uint8_t> b(kBlockSize);
  const std::string key(kMaxTenantPlusKeyV1 - 1, 'k');
  RecordHeader h = SomeHeader();
  h.kind = static_cast<uint16_t>(RecordKind::kDead);
  EncodeHeaderBlock(h, "t", key, 0, b.data());
  auto p = ParseHeaderBlock(b.data(), 7, 8192);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->header.version, kFormatVersionV1);
  EXPECT_EQ(p->kind(), RecordKind::kDead);
  EXPECT_EQ(p->key, key);
  EXPECT_EQ(p->object_version, 0u);
}

}  // namespace
}  // namespace kvpool::storage
