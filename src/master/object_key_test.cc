#include "master/object_key.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include <absl/container/node_hash_map.h>

namespace kvpool {
namespace {

TEST(KeyBytesTest, EmptyShortAndLongKeys) {
  const std::string inline_max(KeyBytes::kInlineBytes, 'a');
  const std::string heap_min(KeyBytes::kInlineBytes + 1, 'b');
  const std::string hash(64, 'f');  // an engine's block hash
  const std::string with_nul("a\0b", 3);
  for (const std::string& s :
       {std::string(), std::string("k"), inline_max, heap_min, hash, with_nul,
        std::string(5000, 'z')}) {
    KeyBytes k(s);
    EXPECT_EQ(k.size(), s.size());
    EXPECT_EQ(k.empty(), s.empty());
    EXPECT_EQ(std::string_view(k), s);
    KeyBytes copy = k;
    EXPECT_EQ(copy.view(), s);
    EXPECT_TRUE(copy == k);
    KeyBytes moved = std::move(copy);
    EXPECT_EQ(moved.view(), s);
    EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from key is empty
    KeyBytes assigned("something else, longer than sixteen bytes");
    assigned = k;
    EXPECT_EQ(assigned.view(), s);
    assigned = KeyBytes("x");
    EXPECT_EQ(assigned.view(), "x");
    assigned = std::move(moved);
    EXPECT_EQ(assigned.view(), s);
    assigned = assigned;  // NOLINT: self-assignment keeps the key
    EXPECT_EQ(assigned.view(), s);
  }
  EXPECT_FALSE(KeyBytes(inline_max) == KeyBytes(inline_max + "a"));
}

// Short and long keys, by owned key and by borrowed view, in the table type
// the master uses.
TEST(ObjectKeyTest, TransparentLookupsShortAndLong) {
  absl::node_hash_map<ObjectKey, int, ObjectKeyHash, ObjectKeyEq> map;
  const std::string long_key(70, 'c');
  map[ObjectKey{1, "short"}] = 1;
  map[ObjectKey{1, long_key}] = 2;
  map[ObjectKey{2, long_key}] = 3;  // same bytes, another tenant
  map[ObjectKey{1, ""}] = 4;
  EXPECT_EQ(map.size(), 4u);
  EXPECT_EQ(map.find(ObjectKeyView{1, "short"})->second, 1);
  EXPECT_EQ(map.find(ObjectKeyView{1, long_key})->second, 2);
  EXPECT_EQ(map.find(ObjectKeyView{2, long_key})->second, 3);
  EXPECT_EQ(map.find(ObjectKeyView{1, ""})->second, 4);
  EXPECT_EQ(map.count(ObjectKeyView{3, "short"}), 0u);
  EXPECT_EQ(map.count(ObjectKeyView{1, long_key.substr(1)}), 0u);
  // The hash of an owned key is that of its view, or the lookups above
  // would miss.
  EXPECT_EQ(ObjectKeyHash()(ObjectKey{1, long_key}),
            ObjectKeyHash()(ObjectKeyView{1, long_key}));
  map.erase(ObjectKeyView{1, long_key});
  EXPECT_EQ(map.count(ObjectKey{1, long_key}), 0u);
}

}  // namespace
}  // namespace kvpool
