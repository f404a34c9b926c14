#include "node/dram_directory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "storage/record_format.h"

namespace kvpool {
namespace {

class DramDirectoryTest : public ::testing::Test {
 protected:
  DramDirectoryTest() : seg_(1 << 16, 0) {
    for (size_t i = 0; i < seg_.size(); ++i) seg_[i] = uint8_t(i * 7 + 3);
  }
  DramDirectory::Resolver Resolver() {
    return [this](uint64_t id) -> std::optional<DramDirectory::SlotView> {
      if (id != 5) return std::nullopt;  // our segment's id at the master
      return DramDirectory::SlotView{0, {seg_.data(), seg_.size()}};
    };
  }
  static rpc::DramEvent Placed(uint64_t seq, uint64_t off, uint64_t size,
                               const std::string& key, uint64_t seg = 5) {
    rpc::DramEvent e;
    e.set_seq(seq);
    e.set_placed(true);
    e.set_segment_id(seg);
    e.set_offset(off);
    e.set_size(size);
    e.set_key(key);
    e.set_version(100 + seq);
    return e;
  }
  static rpc::DramEvent Freed(uint64_t seq, uint64_t off) {
    rpc::DramEvent e;
    e.set_seq(seq);
    e.set_segment_id(5);
    e.set_offset(off);
    return e;
  }
  void Apply(std::vector<rpc::DramEvent> evs) {
    google::protobuf::RepeatedPtrField<rpc::DramEvent> f;
    for (auto& e : evs) *f.Add() = e;
    dir_.Apply(f, Resolver());
  }
  std::vector<std::string> Keys() {
    std::vector<std::string> out;
    for (const auto& e : dir_.Verified(0, {seg_.data(), seg_.size()}))
      out.push_back(e.key);
    return out;
  }

  std::vector<uint8_t> seg_;
  DramDirectory dir_;
};

TEST_F(DramDirectoryTest, AppliesEventsInOrderOnceEach) {
  Apply({Placed(1, 0, 100, "a"), Placed(2, 4096, 100, "b"),
         Placed(3, 8192, 50, "c")});
  EXPECT_EQ(dir_.applied_seq(), 3u);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"a", "b", "c"}));
  // A hand-over sent again (its reply was lost) changes nothing; then b goes.
  Apply({Placed(2, 4096, 100, "b"), Placed(3, 8192, 50, "c"), Freed(4, 4096)});
  EXPECT_EQ(dir_.applied_seq(), 4u);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"a", "c"}));
  auto v = dir_.Verified(0, {seg_.data(), seg_.size()});
  EXPECT_EQ(v[0].tenant, "default");  // as the master names it
  EXPECT_EQ(v[0].version, 101u);
  // A new mount numbers from 1 again; the entries stay.
  dir_.ResetSequence();
  EXPECT_EQ(dir_.applied_seq(), 0u);
  Apply({Freed(1, 0)});
  EXPECT_EQ(Keys(), (std::vector<std::string>{"c"}));
}

TEST_F(DramDirectoryTest, ChangedBytesAreNeverReRegistered) {
  Apply({Placed(1, 0, 100, "a"), Placed(2, 4096, 100, "b")});
  seg_[4096 + 50] ^= 0xFF;  // a late write, a bug: the bytes are not b's
  EXPECT_EQ(Keys(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(dir_.checksum_mismatches(), 1u);
  EXPECT_EQ(dir_.size(), 1u);  // dropped for good
}

TEST_F(DramDirectoryTest, APromotionsNotedChecksumIsTakenInsteadOfAHash) {
  const uint64_t real = storage::DataChecksum(seg_.data(), 100);
  // Noted for a (key, version, size) at an offset: its placement takes it.
  dir_.NoteChecksum(0, 0, 100, /*version=*/101, "", "a", real);
  // A wrong note shows the note is what the entry holds (no hash was
  // taken): the entry never verifies.
  dir_.NoteChecksum(0, 4096, 100, 102, "default", "b", real ^ 1);
  // Notes that do not match their event are dropped, and the event hashes.
  dir_.NoteChecksum(0, 8192, 100, 103, "default", "other-key", 1);
  dir_.NoteChecksum(0, 12288, 100, 999, "default", "d", 1);  // version
  dir_.NoteChecksum(0, 16384, 99, 105, "default", "e", 1);   // size
  Apply({Placed(1, 0, 100, "a"), Placed(2, 4096, 100, "b"),
         Placed(3, 8192, 100, "c"), Placed(4, 12288, 100, "d"),
         Placed(5, 16384, 100, "e")});
  EXPECT_EQ(dir_.noted_checksums_used(), 2u);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"a", "c", "d", "e"}));
  EXPECT_EQ(dir_.checksum_mismatches(), 1u);  // b's
  // A note is used once: the same range placed again hashes.
  Apply({Freed(6, 0), Placed(7, 0, 100, "a")});
  EXPECT_EQ(dir_.noted_checksums_used(), 2u);
  // Unknown slots are ignored; notes are bounded.
  dir_.NoteChecksum(7, 0, 100, 1, "default", "x", 1);
  for (uint64_t i = 0; i <= DramDirectory::kMaxNotes; ++i)
    dir_.NoteChecksum(1, i * 4096, 100, 1, "default", "k", 1);
  Apply({Placed(8, 4096, 100, "k")});  // slot 0: no note there now
  EXPECT_EQ(dir_.noted_checksums_used(), 2u);
}

TEST_F(DramDirectoryTest, EventsForOtherSegmentsOrOutOfRangeChangeNothing) {
  Apply({Placed(1, 0, 100, "x", /*seg=*/9), Placed(2, 1 << 16, 10, "past"),
         Placed(3, (1 << 16) - 8, 100, "across"), Placed(4, 0, 0, "empty")});
  EXPECT_EQ(dir_.applied_seq(), 4u);  // consumed, so the master can go on
  EXPECT_TRUE(Keys().empty());
  dir_.Forget(0, 123);  // unknown: harmless
  dir_.Forget(7, 0);    // no such slot: harmless
  EXPECT_EQ(dir_.size(), 0u);
}

}  // namespace
}  // namespace kvpool

namespace kvpool {
namespace {

TEST(DramDirectoryOverlapTest, TellsWhetherARangeTouchesACompleteReplica) {
  std::vector<uint8_t> mem(1 << 16, 1);
  DramDirectory d;
  google::protobuf::RepeatedPtrField<rpc::DramEvent> events;
  auto* e = events.Add();
  e->set_seq(1);
  e->set_placed(true);
  e->set_segment_id(5);
  e->set_offset(4096);
  e->set_size(4096);
  e->set_tenant("t");
  e->set_key("k");
  e->set_version(1);
  d.Apply(events, [&](uint64_t id) -> std::optional<DramDirectory::SlotView> {
    if (id != 5) return std::nullopt;
    return DramDirectory::SlotView{0, {mem.data(), mem.size()}};
  });
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d.Overlaps(0, 4096, 4096));
  EXPECT_TRUE(d.Overlaps(0, 0, 4097));      // reaches its first byte
  EXPECT_TRUE(d.Overlaps(0, 8191, 100));    // starts at its last byte
  EXPECT_FALSE(d.Overlaps(0, 0, 4096));     // ends right before it
  EXPECT_FALSE(d.Overlaps(0, 8192, 100));   // starts right after it
  EXPECT_FALSE(d.Overlaps(1, 4096, 4096));  // another slot
  EXPECT_FALSE(d.Overlaps(0, 4096, 0));
}

}  // namespace
}  // namespace kvpool
