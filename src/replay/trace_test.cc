#include "replay/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "replay/test_trace.h"

namespace kvpool::replay {
namespace {

TEST(TraceTest, ReadsEveryFieldAndHonoursTheLimit) {
  std::string path = testing::WriteTinyTrace(testing::TempPath("t1.jsonl"));
  auto all = ReadTrace(path);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 34u);
  EXPECT_EQ((*all)[1].timestamp_ms, 50);
  EXPECT_EQ((*all)[1].input_length, 3000u);
  EXPECT_EQ((*all)[1].output_length, 4u);
  EXPECT_EQ((*all)[1].hash_ids, (std::vector<uint64_t>{6, 7, 8, 9, 10, 11}));
  auto some = ReadTrace(path, 5);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->size(), 5u);
  std::filesystem::remove(path);
}

TEST(TraceTest, MalformedLineIsAnErrorNamingTheLine) {
  std::string path = testing::TempPath("t2.jsonl");
  {
    std::ofstream out(path);
    out << R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
        << "\n\n"
        << R"({"timestamp": 5, "input_length": 1})"
        << "\n";
  }
  auto r = ReadTrace(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r.status().message().find(":3:"), std::string::npos)
      << r.status().message();
  std::filesystem::remove(path);
}

// Found by fuzz_trace: nlohmann's get<uint64_t> turned -512 into 2^64 - 512
// tokens (and 1.5 into 1, true into 1) instead of refusing the line.
TEST(TraceTest, NegativeFractionalOrBoolCountsAreRejected) {
  const char* bad[] = {
      R"({"timestamp": 0, "input_length": -512, "output_length": 6, "hash_ids": [0]})",
      R"({"timestamp": 0, "input_length": 512, "output_length": 1.5, "hash_ids": [0]})",
      R"({"timestamp": 0, "input_length": 512, "output_length": 6, "hash_ids": [-1]})",
      R"({"timestamp": true, "input_length": 512, "output_length": 6, "hash_ids": []})",
      R"({"timestamp": 0, "input_length": true, "output_length": 6, "hash_ids": []})",
  };
  for (const char* line : bad) {
    std::string path = testing::TempPath("neg.jsonl");
    std::ofstream(path) << line << "\n";
    auto r = ReadTrace(path);
    EXPECT_EQ(r.status().code(), ErrorCode::INVALID_PARAMS) << line;
    std::filesystem::remove(path);
  }
  std::string path = testing::TempPath("ok.jsonl");
  std::ofstream(path)
      << R"({"timestamp": 1.5, "input_length": 512, "output_length": 6, "hash_ids": [18446744073709551615]})"
      << "\n";
  auto r = ReadTrace(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].hash_ids[0], UINT64_MAX);
  std::filesystem::remove(path);
}

TEST(TraceTest, DecreasingTimestampsAreRejected) {
  std::string path = testing::TempPath("t3.jsonl");
  {
    std::ofstream out(path);
    out << R"({"timestamp": 10, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
        << "\n"
        << R"({"timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": [2]})"
        << "\n";
  }
  EXPECT_FALSE(ReadTrace(path).ok());
  EXPECT_EQ(ReadTrace("/nonexistent/trace.jsonl").status().code(),
            ErrorCode::FILE_NOT_FOUND);
  std::filesystem::remove(path);
}

TEST(TraceTest, SummaryCountsReuse) {
  std::vector<TraceRequest> t(3);
  t[0] = {0, 1024, 10, {1, 2}};
  t[1] = {100, 1536, 20, {1, 2, 3}};
  t[2] = {300, 512, 30, {4}};
  TraceSummary s = Summarize(t, 0, 3);
  EXPECT_EQ(s.requests, 3u);
  EXPECT_EQ(s.span_ms, 300);
  EXPECT_EQ(s.distinct_blocks, 4u);
  EXPECT_EQ(s.block_refs, 6u);
  EXPECT_EQ(s.reused_refs, 2u);
  EXPECT_EQ(s.max_blocks, 3u);
  EXPECT_DOUBLE_EQ(s.mean_output_tokens, 20);
  EXPECT_EQ(BlockKey(17), "blk-17");
}

}  // namespace
}  // namespace kvpool::replay
