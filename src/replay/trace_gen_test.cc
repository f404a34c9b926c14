#include "replay/trace_gen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "replay/test_trace.h"

namespace kvpool::replay {
namespace {

// One class, no clamping in reach, so means match their parameters.
TraceGenConfig Simple(double mean_turns = 1) {
  SessionClass k;
  k.name = "t";
  k.system_prompts = 0;
  k.mean_turns = mean_turns;
  k.first_user_tokens = {1000, 0.8, 1, 1e9};
  k.user_tokens = {1000, 0.8, 1, 1e9};
  k.output_tokens = {200, 0.7, 1, 1e9};
  k.think_ms = {5000, 0.5, 0, 1e9};
  TraceGenConfig c;
  c.requests = 4000;
  c.request_rate = 5;
  c.max_prompt_tokens = 466944;
  c.classes = {k};
  return c;
}

double InterArrivalCv(const std::vector<TraceRequest>& t) {
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) {
    gaps.push_back(t[i].timestamp_ms - t[i - 1].timestamp_ms);
  }
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= double(gaps.size());
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= double(gaps.size());
  return std::sqrt(var) / mean;
}

double ReusedShare(const std::vector<TraceRequest>& t) {
  TraceSummary s = Summarize(t, 0, t.size());
  return double(s.reused_refs) / double(s.block_refs);
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TraceGenTest, MeansFollowTheirParameters) {
  TraceGenConfig c = Simple(3);
  // At least a block, so a session's first block is its own and chains its
  // requests below; the clamp is 2.5 sigma below the mean.
  c.classes[0].first_user_tokens = {2000, 0.5, 512, 1e9};
  auto t = GenerateTrace(c);
  ASSERT_EQ(t.size(), 4000u);
  double out = 0;
  for (const auto& r : t) out += double(r.output_length);
  EXPECT_NEAR(out / double(t.size()), 200, 200 * 0.06);

  // A later turn's new user tokens: its input less the previous turn's
  // prompt and output.
  std::unordered_map<uint64_t, const TraceRequest*> last_of_session;
  double first = 0, later = 0;
  size_t firsts = 0, laters = 0;
  for (const auto& r : t) {
    ASSERT_FALSE(r.hash_ids.empty());
    auto& prev = last_of_session[r.hash_ids[0]];
    if (prev == nullptr) {
      first += double(r.input_length);
      ++firsts;
    } else {
      const uint64_t before = prev->input_length + prev->output_length;
      ASSERT_GT(r.input_length, before);
      later += double(r.input_length - before);
      ++laters;
    }
    prev = &r;
  }
  ASSERT_GT(firsts, 1000u);
  ASSERT_GT(laters, 1500u);
  EXPECT_NEAR(first / double(firsts), 2000, 2000 * 0.06);
  EXPECT_NEAR(later / double(laters), 1000, 1000 * 0.08);
}

TEST(TraceGenTest, ArrivalsPoissonHaveCvOneAndGammaIsBursty) {
  TraceGenConfig c = Simple(1);  // one request per session
  const double poisson = InterArrivalCv(GenerateTrace(c));
  EXPECT_NEAR(poisson, 1.0, 0.1);
  c.arrival = ArrivalProcess::kGamma;
  c.arrival_cv = 3;
  const double bursty = InterArrivalCv(GenerateTrace(c));
  EXPECT_GT(bursty, 2.0);
  // The rate is the one asked for, bursts or not.
  auto t = GenerateTrace(c);
  const double rate = double(t.size()) / (t.back().timestamp_ms / 1000);
  EXPECT_NEAR(rate, 5, 5 * 0.25);
}

TEST(TraceGenTest, ReuseGrowsWithTurnsPerSession) {
  const double one = ReusedShare(GenerateTrace(Simple(1)));
  const double three = ReusedShare(GenerateTrace(Simple(3)));
  const double eight = ReusedShare(GenerateTrace(Simple(8)));
  EXPECT_LT(one, 0.01);  // no system prompt, single turns: nothing shared
  EXPECT_GT(three, one + 0.2);
  EXPECT_GT(eight, three + 0.1);
}

TEST(TraceGenTest, OneSystemPromptOpensEveryRequest) {
  TraceGenConfig c = Simple(2);
  c.classes[0].system_prompts = 1;
  c.classes[0].system_tokens = {700, 0, 512, 8192};
  auto t = GenerateTrace(c);
  ASSERT_FALSE(t.empty());
  for (const auto& r : t) ASSERT_EQ(r.hash_ids[0], t[0].hash_ids[0]);
  // Three prompts with Zipf popularity: more than one first block, and the
  // most popular one opens more sessions than the least popular.
  c.classes[0].system_prompts = 3;
  c.classes[0].system_zipf = 1.5;
  std::map<uint64_t, size_t> first;
  for (const auto& r : GenerateTrace(c)) ++first[r.hash_ids[0]];
  ASSERT_EQ(first.size(), 3u);
  size_t lo = SIZE_MAX, hi = 0;
  for (auto [id, count] : first) {
    lo = std::min(lo, count);
    hi = std::max(hi, count);
  }
  EXPECT_GT(hi, 2 * lo);
}

TEST(TraceGenTest, SameSeedSameFileOtherSeedOtherFile) {
  auto c = PresetConfig("bursty-mix");
  ASSERT_TRUE(c.ok());
  c.value().requests = 1500;
  const std::string a = testing::TempPath("gen-a.jsonl");
  const std::string b = testing::TempPath("gen-b.jsonl");
  const std::string d = testing::TempPath("gen-d.jsonl");
  ASSERT_TRUE(WriteTrace(GenerateTrace(c.value()), a).ok());
  ASSERT_TRUE(WriteTrace(GenerateTrace(c.value()), b).ok());
  c.value().seed = 2;
  ASSERT_TRUE(WriteTrace(GenerateTrace(c.value()), d).ok());
  EXPECT_FALSE(FileText(a).empty());
  EXPECT_EQ(FileText(a), FileText(b));
  EXPECT_NE(FileText(a), FileText(d));
  for (const auto& p : {a, b, d}) std::filesystem::remove(p);
}

TEST(TraceGenTest, RoundTripsThroughReadTrace) {
  auto c = PresetConfig("chat");
  ASSERT_TRUE(c.ok());
  c.value().requests = 500;
  const auto trace = GenerateTrace(c.value());
  const std::string path = testing::TempPath("gen-rt.jsonl");
  ASSERT_TRUE(WriteTrace(trace, path).ok());
  auto back = ReadTrace(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ((*back)[i].timestamp_ms, trace[i].timestamp_ms);
    EXPECT_EQ((*back)[i].input_length, trace[i].input_length);
    EXPECT_EQ((*back)[i].output_length, trace[i].output_length);
    EXPECT_EQ((*back)[i].hash_ids, trace[i].hash_ids);
  }
  std::filesystem::remove(path);
}

TEST(TraceGenTest, UnwritableOutputIsAnError) {
  auto s = WriteTrace({}, "/nonexistent-dir/trace.jsonl");
  EXPECT_EQ(s.code(), ErrorCode::FILE_WRITE_FAIL);
  EXPECT_NE(s.message().find("/nonexistent-dir"), std::string::npos);
}

TEST(TraceGenTest, UnknownPresetAndBadConfigAreErrors) {
  auto p = PresetConfig("nope");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("chat"), std::string::npos);
  TraceGenConfig c = Simple();
  c.request_rate = 0;
  EXPECT_FALSE(ValidateTraceGenConfig(c).ok());
  EXPECT_TRUE(GenerateTrace(c).empty());
  c = Simple();
  c.classes[0].output_tokens.min = 10;
  c.classes[0].output_tokens.max = 5;
  EXPECT_FALSE(ValidateTraceGenConfig(c).ok());
  c = Simple();
  c.classes[0].system_prompts = 1;
  c.classes[0].system_tokens = {1000, 0, 1, 2 * 466944.0};
  EXPECT_FALSE(ValidateTraceGenConfig(c).ok());
}

// Every preset: valid, sorted integer ms, prompts within the cap with as
// many blocks as tokens need, and the prefix property: an id always sits at
// the same position behind the same id, so equal ids at position j mean
// equal ids at every position before j.
TEST(TraceGenTest, EveryPresetKeepsThePrefixPropertyAndTheCap) {
  ASSERT_GE(TracePresets().size(), 4u);
  for (const auto& preset : TracePresets()) {
    SCOPED_TRACE(preset.name);
    TraceGenConfig c = preset.config;
    ASSERT_TRUE(ValidateTraceGenConfig(c).ok());
    c.requests = 3400;
    const auto t = GenerateTrace(c);
    ASSERT_EQ(t.size(), 3400u);
    std::unordered_map<uint64_t, std::pair<size_t, uint64_t>> where;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto& r = t[i];
      ASSERT_EQ(r.timestamp_ms, std::floor(r.timestamp_ms));
      if (i > 0) {
        ASSERT_GE(r.timestamp_ms, t[i - 1].timestamp_ms);
      }
      ASSERT_LE(r.input_length, c.max_prompt_tokens);
      ASSERT_GE(r.output_length, 1u);
      ASSERT_EQ(r.hash_ids.size(),
                (r.input_length + kTraceBlockTokens - 1) / kTraceBlockTokens);
      for (size_t j = 0; j < r.hash_ids.size(); ++j) {
        const uint64_t parent = j == 0 ? ~uint64_t{0} : r.hash_ids[j - 1];
        auto [it, fresh] = where.try_emplace(r.hash_ids[j], j, parent);
        ASSERT_EQ(it->second, std::make_pair(j, parent))
            << "request " << i << " block " << j;
      }
    }
    // The replay README's command keeps all of its measured blocks in DRAM.
    EXPECT_LT(ComputeTraceGenStats(t).window_distinct_blocks, 5000u);
  }
}

TEST(TraceGenTest, SessionsEndBeforeTheCap) {
  TraceGenConfig c = Simple(50);
  c.max_prompt_tokens = 8192;
  const auto t = GenerateTrace(c);
  ASSERT_EQ(t.size(), 4000u);
  uint64_t longest = 0;
  for (const auto& r : t) longest = std::max(longest, r.input_length);
  EXPECT_LE(longest, 8192u);
  EXPECT_GT(longest, 4096u);  // the cap, not the lengths, ended sessions
}

TEST(TraceGenTest, AgentIsDiskBoundAndLongDocGpuBound) {
  // The presets' documented shapes: agent requests mostly reuse blocks,
  // long-doc requests are mostly new (their reuse is the system prompt and
  // the rare follow-up).
  auto agent = PresetConfig("agent");
  auto doc = PresetConfig("long-doc");
  ASSERT_TRUE(agent.ok() && doc.ok());
  const auto a = ComputeTraceGenStats(GenerateTrace(agent.value()));
  const auto d = ComputeTraceGenStats(GenerateTrace(doc.value()));
  EXPECT_GT(a.mean_reused_blocks, 4 * a.mean_new_blocks);
  EXPECT_GT(d.mean_new_blocks, 2 * d.mean_reused_blocks);
  EXPECT_GT(d.mean_new_blocks, 4 * a.mean_new_blocks);
}

}  // namespace
}  // namespace kvpool::replay
