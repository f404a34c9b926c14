// kvpool bench transfer --security: what authentication and data-plane
// capabilities cost a put and a get. Five LocalClusters of one node run side
// by side in the same process: "open" (no cluster secret; the master signs
// no capabilities, so its node serves unchecked, as with an older master),
// "open-again" (the same: the noise floor), "caps", "caps+auth" (and a
// tenant credential on every RPC) and "+tls" (and TLS on the data plane).
//
// Two ways to read the cost:
// - Time (the default). Each round starts the five clusters afresh and runs
//   every case on them, one op per arm in turn (in a random order each
//   time), so the machine's drift falls on every arm alike; an arm's overhead
//   in a round is its p50 over open's p50, and the table gives the median and
//   quartiles of that over the rounds. Fresh clusters matter:
//   with one set of clusters for every round, whatever one instance happens
//   to cost (where its threads and pages landed) was in every round, and
//   showed as several percent between two identical arms in some runs.
// - Instructions (--security-instructions N, under callgrind): the same
//   cases, N ops per arm, each window dumped on its own; the count does not
//   depend on what else the machine is doing (scripts/callgrind_table.py).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define KVPOOL_HAVE_CALLGRIND 1
#endif

#include "bench/bench_main.h"
#include "benchutil/bench_util.h"
#include "common/auth.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"
#include "tests/tls_test_files.h"

namespace kvpool {

namespace {

using bench::NowSec;
using bench::Percentile;

// Linear interpolation between the nearest ranks, so the median of ten
// rounds is the mean of the middle two rather than the sixth.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

constexpr int kArms = 5;
const char* const kArmNames[kArms] = {"open", "open-again", "caps", "caps+auth",
                                      "caps+auth+tls"};
constexpr int kCapsAuth = 3;
constexpr int kTls = 4;
constexpr TransportMode kModes[] = {TransportMode::kShm, TransportMode::kTcp};

// get and put move a value; lookup is the get's master round trip alone
// (BatchGetReplicaDesc of the same key), to tell what the RPC costs from
// what the copy does.
enum class OpKind { kGet, kPut, kLookup };
constexpr OpKind kValueOps[] = {OpKind::kGet, OpKind::kPut};

const char* OpName(OpKind k) {
  return k == OpKind::kGet ? "get" : k == OpKind::kPut ? "put" : "lookup";
}

const char* PathName(TransportMode m) {
  return m == TransportMode::kShm ? "shm" : "tcp";
}

// What the arms share: the secret, the tenant credential, a throwaway CA.
struct ArmFiles {
  std::string secret_file, cred_file;
  TlsTestFiles tls;
};

std::array<LocalClusterOptions, kArms> ArmOptions(const ArmFiles& f,
                                                  uint64_t max_size) {
  std::array<LocalClusterOptions, kArms> o;
  o[0].num_nodes = 1;
  o[0].segment_size = std::max<uint64_t>(256ull << 20, 64 * max_size);
  o[0].data_capabilities = false;
  o[1] = o[0];
  o[1].node_id_prefix = "again-node";
  o[2] = o[0];
  o[2].data_capabilities = true;
  o[2].node_id_prefix = "caps-node";
  o[3] = o[2];
  o[3].node_id_prefix = "secure-node";
  o[3].cluster_secret_file = f.secret_file;
  o[4] = o[3];
  o[4].node_id_prefix = "tls-node";
  o[4].data_tls_cert_file = f.tls("server.pem");
  o[4].data_tls_key_file = f.tls("server.key");
  o[4].data_tls_ca_file = f.tls("ca.pem");
  return o;
}

// The five clusters of one round, started in `first`-rotated order.
Result<std::vector<std::unique_ptr<LocalCluster>>> StartArms(
    const std::array<LocalClusterOptions, kArms>& opts, int first) {
  std::vector<std::unique_ptr<LocalCluster>> clusters(kArms);
  for (int k = 0; k < kArms; ++k) {
    const int a = (first + k) % kArms;
    clusters[a] = std::make_unique<LocalCluster>(opts[a]);
    if (Status s = clusters[a]->Start(); !s.ok()) {
      return Status(s.code(),
                    fmt::format("{} cluster: {}", kArmNames[a], s.message()));
    }
  }
  return clusters;
}

// One case's clients, one per arm, with the value put and both buffers
// registered; undone by the destructor.
class CaseClients {
 public:
  static Result<std::unique_ptr<CaseClients>> Make(
      const std::vector<std::unique_ptr<LocalCluster>>& clusters,
      const ArmFiles& f, TransportMode mode, std::string& value,
      std::vector<uint8_t>* dst) {
    auto cc = std::unique_ptr<CaseClients>(new CaseClients(value, dst));
    for (int a = 0; a < kArms; ++a) {
      ClientConfig config;
      config.transport = mode;
      if (a >= kCapsAuth) config.credential_file = f.cred_file;
      if (a == kTls) config.data_tls_ca_file = f.tls("ca.pem");
      auto c = clusters[a]->NewClient(config);
      if (!c.ok()) return c.status();
      cc->clients_[a] = std::move(c.value());
      Client* client = cc->clients_[a].get();
      for (void* buf : {static_cast<void*>(value.data()),
                        static_cast<void*>(dst->data())}) {
        if (Status s = client->RegisterBuffer(buf, value.size()); !s.ok())
          return s;
      }
      if (Status s = cc->PutValue(a); !s.ok()) return s;
    }
    return cc;
  }
  ~CaseClients() {
    for (auto& c : clients_) {
      if (!c) continue;
      (void)c->RemoveAll(true);
      (void)c->UnregisterBuffer(value_.data());
      (void)c->UnregisterBuffer(dst_->data());
    }
  }
  Client* operator[](int a) const { return clients_[a].get(); }
  Status PutValue(int a) { return clients_[a]->Put("v", value_); }
  // Puts fill the segment: each arm starts a put window from an empty one.
  Status Empty(int a) {
    if (auto r = clients_[a]->RemoveAll(true); !r.ok()) return r.status();
    return PutValue(a);
  }
  // One op; false when it failed.
  bool Op(int a, OpKind kind) {
    const size_t size = value_.size();
    switch (kind) {
      case OpKind::kPut:
        return clients_[a]
            ->PutFrom(fmt::format("p{}", next_key_++), value_.data(), size)
            .ok();
      case OpKind::kGet:
        return clients_[a]->GetInto("v", dst_->data(), size).ok();
      case OpKind::kLookup: {
        auto r = clients_[a]->BatchGetReplicaDesc({"v"});
        return r.size() == 1 && r[0].ok();
      }
    }
    return false;
  }
  // A get whose bytes are compared with the value: after each window, not
  // in it, so the comparison weighs on no arm's figure.
  bool GetMatches(int a) {
    std::fill(dst_->begin(), dst_->end(), 0);
    return Op(a, OpKind::kGet) &&
           std::equal(value_.begin(), value_.end(), dst_->begin(),
                      [](char v, uint8_t d) { return uint8_t(v) == d; });
  }

 private:
  CaseClients(std::string& value, std::vector<uint8_t>* dst)
      : value_(value), dst_(dst) {}
  std::string& value_;
  std::vector<uint8_t>* dst_;
  std::unique_ptr<Client> clients_[kArms];
  uint64_t next_key_ = 0;
};

std::string MakeValue(uint64_t size) {
  std::string value(size, '\0');
  for (size_t i = 0; i < size; ++i) value[i] = char(i * 131 + 7);
  return value;
}

// One (op, path, size) row: every round's p50 per arm and the samples.
struct CaseStats {
  OpKind op;
  TransportMode mode;
  uint64_t size;
  std::vector<double> lat[kArms];
  std::vector<double> ratios[kArms];  // [0] unused
};

void PrintTimingTables(const std::vector<CaseStats>& cases, int rounds) {
  std::printf(
      "\nkvpool bench transfer --security: %d rounds, each on five freshly "
      "started LocalClusters of 1 node in one process. open = no auth, no "
      "capabilities; open-again = the same (the noise floor); caps = "
      "capability on every TCP range; caps+auth = and a tenant credential on "
      "every RPC; +tls = and TLS on the data plane (shm does not use it); "
      "lookup = a get's master round trip alone.\n"
      "p50 us per arm over all rounds, then each arm's overhead: the median "
      "over rounds of its p50 / open's p50 - 1, [quartiles] of the same\n",
      rounds);
  std::printf("%-6s %-4s %6s %8s %8s %8s %9s %8s\n", "op", "path", "size",
              "open", "again", "caps", "caps+auth", "+tls");
  for (const auto& c : cases) {
    std::printf("%-6s %-4s %6s", OpName(c.op), PathName(c.mode),
                FormatSize(c.size).c_str());
    for (int a = 0; a < kArms; ++a)
      std::printf(" %*.1f", a == kCapsAuth ? 9 : 8,
                  Percentile(c.lat[a], 50) * 1e6);
    std::printf("\n");
  }
  std::printf("\n%-6s %-4s %6s | %-21s | %-21s | %-21s | %-21s\n", "op", "path",
              "size", "open-again (A/A)", "caps", "caps+auth", "+tls");
  for (const auto& c : cases) {
    std::printf("%-6s %-4s %6s", OpName(c.op), PathName(c.mode),
                FormatSize(c.size).c_str());
    for (int a = 1; a < kArms; ++a) {
      auto pct = [&](double q) { return (Quantile(c.ratios[a], q) - 1) * 100; };
      std::printf(" | %5.1f%% [%5.1f,%5.1f]%%", pct(0.5), pct(0.25), pct(0.75));
    }
    std::printf("\n");
  }
  std::printf("target: <= 3%% on 1 MiB gets, shm and tcp\n");
}

void WriteTimingJson(const std::string& path,
                     const std::vector<CaseStats>& cases) {
  std::ofstream out(path);
  const char* const keys[kArms] = {"open", "again", "caps", "caps_auth", "tls"};
  out << "[";
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    out << (i ? "," : "")
        << fmt::format(R"({{"op":"{}","path":"{}","size":{})", OpName(c.op),
                       PathName(c.mode), c.size);
    for (int a = 0; a < kArms; ++a) {
      out << fmt::format(R"(,"{}_p50_us":{:.1f})", keys[a],
                         Percentile(c.lat[a], 50) * 1e6);
      if (a == 0) continue;
      out << fmt::format(
          R"(,"{}_overhead_pct":{:.2f},"{}_overhead_q1_pct":{:.2f},)"
          R"("{}_overhead_q3_pct":{:.2f},"{}_round_ratios":[{:.4f}])",
          keys[a], (Quantile(c.ratios[a], 0.5) - 1) * 100, keys[a],
          (Quantile(c.ratios[a], 0.25) - 1) * 100, keys[a],
          (Quantile(c.ratios[a], 0.75) - 1) * 100, keys[a],
          fmt::join(c.ratios[a], ","));
    }
    out << "}";
  }
  out << "]\n";
}

int RunTiming(const BenchOptions& opts, const ArmFiles& files,
              const std::array<LocalClusterOptions, kArms>& arm_opts) {
  const int rounds = opts.security_rounds;
  std::vector<CaseStats> cases;
  for (TransportMode mode : kModes) {
    for (uint64_t size : opts.transfer_sizes) {
      for (OpKind op : kValueOps) cases.push_back({op, mode, size, {}, {}});
      if (mode == kModes[0] && size == opts.transfer_sizes[0])
        cases.push_back({OpKind::kLookup, mode, size, {}, {}});
    }
  }
  // Each arm gets this long per case and round.
  const double slice = opts.seconds_per_case / rounds;
  std::mt19937 rng(12345);  // fixed: a rerun draws the same orders
  for (int round = 0; round < rounds; ++round) {
    std::fprintf(stderr, "[round %d/%d] starting five clusters...\n", round + 1,
                 rounds);
    auto clusters = StartArms(arm_opts, round % kArms);
    if (!clusters.ok()) {
      std::fprintf(stderr, "error: %s\n", clusters.status().ToString().c_str());
      return 1;
    }
    size_t ci = 0;
    for (TransportMode mode : kModes) {
      for (uint64_t size : opts.transfer_sizes) {
        std::string value = MakeValue(size);
        std::vector<uint8_t> dst(size);
        auto clients =
            CaseClients::Make(clusters.value(), files, mode, value, &dst);
        if (!clients.ok()) {
          std::fprintf(stderr, "error: clients: %s\n",
                       clients.status().ToString().c_str());
          return 1;
        }
        CaseClients& cc = *clients.value();
        for (; ci < cases.size() && cases[ci].mode == mode &&
               cases[ci].size == size;
             ++ci) {
          CaseStats& stats = cases[ci];
          const OpKind op = stats.op;
          // One op per arm in turn, in a new random order each time: the
          // machine's drift over the slice falls on every arm alike, and
          // so does what an op leaves behind for the next (a TLS op's
          // work in the kernel, say: with a fixed cyclic order, open always
          // came right after +tls and paid for it).
          std::vector<double> lat[kArms];
          bool ok = true;
          const double end = NowSec() + slice * kArms;
          std::array<int, kArms> order;
          std::iota(order.begin(), order.end(), 0);
          for (int i = 0; i < 5 || NowSec() < end; ++i) {
            std::shuffle(order.begin(), order.end(), rng);
            for (int a : order) {
              const double t = NowSec();
              ok &= cc.Op(a, op);
              lat[a].push_back(NowSec() - t);
            }
          }
          double p50[kArms];
          for (int a = 0; a < kArms; ++a) {
            p50[a] = Percentile(lat[a], 50);
            stats.lat[a].insert(stats.lat[a].end(), lat[a].begin(),
                                lat[a].end());
            if (op == OpKind::kPut)
              bench::MustOk(cc.Empty(a), "RemoveAll and put");
            ok &= cc.GetMatches(a);
          }
          if (!ok) {
            std::fprintf(stderr,
                         "error: a put or get failed, or a get read wrong "
                         "bytes\n");
            return 1;
          }
          for (int a = 1; a < kArms; ++a)
            stats.ratios[a].push_back(p50[a] / p50[0]);
        }
      }
    }
    for (auto& c : clusters.value()) c->Stop();
  }
  PrintTimingTables(cases, rounds);
  if (!opts.json_path.empty()) WriteTimingJson(opts.json_path, cases);
  return 0;
}

int RunInstructionCount(
    const BenchOptions& opts, const ArmFiles& files,
    const std::array<LocalClusterOptions, kArms>& arm_opts) {
#ifndef KVPOOL_HAVE_CALLGRIND
  (void)opts, (void)files, (void)arm_opts;
  std::fprintf(stderr,
               "error: --security-instructions needs <valgrind/callgrind.h> "
               "at build time (Debian package valgrind)\n");
  return 1;
#else
  if (!RUNNING_ON_VALGRIND) {
    std::fprintf(stderr,
                 "error: --security-instructions counts under callgrind: run "
                 "it as valgrind --tool=callgrind kvpool bench transfer "
                 "--security --security-instructions N (see "
                 "docs/security.md)\n");
    return 1;
  }
  const int n = opts.security_instructions;
  auto clusters = StartArms(arm_opts, 0);
  if (!clusters.ok()) {
    std::fprintf(stderr, "error: %s\n", clusters.status().ToString().c_str());
    return 1;
  }
  // What the clusters' own threads (heartbeats, housekeeping) run while
  // nothing is asked of them; scripts/callgrind_table.py takes it off each
  // window in proportion to the window's length.
  auto idle = [](int i) {
    CALLGRIND_ZERO_STATS;
    const double t0 = NowSec();
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const std::string label = fmt::format("idle {}", i);
    CALLGRIND_DUMP_STATS_AT(label.c_str());
    std::printf("window\t%s\t1\t%.3f\n", label.c_str(), NowSec() - t0);
  };
  idle(0);
  for (TransportMode mode : kModes) {
    for (uint64_t size : opts.transfer_sizes) {
      std::string value = MakeValue(size);
      std::vector<uint8_t> dst(size);
      auto clients =
          CaseClients::Make(clusters.value(), files, mode, value, &dst);
      if (!clients.ok()) {
        std::fprintf(stderr, "error: clients: %s\n",
                     clients.status().ToString().c_str());
        return 1;
      }
      CaseClients& cc = *clients.value();
      // Two passes, the second in reverse order: whatever the first window
      // after a case starts still pays (seen: 2x the instructions of the
      // same arm later) falls on a different arm each pass, and the table
      // takes each arm's smaller count.
      for (int pass = 0; pass < 2; ++pass) {
        for (OpKind op : kValueOps) {
          for (int k = 0; k < kArms; ++k) {
            const int a = pass == 0 ? k : kArms - 1 - k;
            bool ok = true;
            for (int i = 0; i < 10; ++i) ok &= cc.Op(a, op);  // warm up
            // The nodes finish what the last window left them (a node
            // hashes each new value for its DRAM directory at its next
            // heartbeat), so it is not counted against this arm.
            std::this_thread::sleep_for(std::chrono::seconds(2));
            CALLGRIND_ZERO_STATS;
            const double t0 = NowSec();
            for (int i = 0; i < n; ++i) ok &= cc.Op(a, op);
            const std::string label =
                fmt::format("{} {} {} {} {}", OpName(op), PathName(mode),
                            FormatSize(size), kArmNames[a], pass);
            CALLGRIND_DUMP_STATS_AT(label.c_str());
            std::printf("window\t%s\t%d\t%.3f\n", label.c_str(), n,
                        NowSec() - t0);
            std::fflush(stdout);
            if (!ok) {
              std::fprintf(stderr, "error: %s: an op failed\n", label.c_str());
              return 1;
            }
            if (op == OpKind::kPut)
              bench::MustOk(cc.Empty(a), "RemoveAll and put");
            if (!cc.GetMatches(a)) {
              std::fprintf(stderr, "error: %s: a get read wrong bytes\n",
                           label.c_str());
              return 1;
            }
          }
        }
      }
    }
  }
  idle(1);
  for (auto& c : clusters.value()) c->Stop();
  return 0;
#endif
}

}  // namespace

int RunSecurityCostBench(const BenchOptions& opts) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(opts.dir.empty() ? "/tmp" : opts.dir) /
                       fmt::format("kvpool-security-bench-{}", getpid());
  fs::create_directories(dir);
  ArmFiles files;
  files.secret_file = (dir / "cluster.secret").string();
  files.cred_file = (dir / "tenant.cred").string();
  auto secret = auth::ClusterSecret::Generate();
  auto cred = auth::MakeCredential(secret, auth::Role::kTenant, "default");
  if (!cred.ok() ||
      !auth::WritePrivateFile(files.secret_file, secret.ToHex() + "\n").ok() ||
      !auth::WritePrivateFile(files.cred_file,
                              auth::FormatCredentialFile(*cred))
           .ok()) {
    std::fprintf(stderr, "error: cannot write the secret files in %s\n",
                 dir.c_str());
    return 1;
  }
  if (!files.tls.ok()) {
    std::fprintf(stderr, "error: cannot make TLS files (openssl missing?)\n");
    return 1;
  }
  const uint64_t max_size =
      *std::max_element(opts.transfer_sizes.begin(), opts.transfer_sizes.end());
  const auto arm_opts = ArmOptions(files, max_size);
  const int rc = opts.security_instructions > 0
                     ? RunInstructionCount(opts, files, arm_opts)
                     : RunTiming(opts, files, arm_opts);
  fs::remove_all(dir);
  return rc;
}

}  // namespace kvpool
