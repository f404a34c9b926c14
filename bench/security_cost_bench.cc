// kvpool bench transfer --security: what authentication and data-plane
// capabilities cost a put and a get. Two LocalClusters run side by side in
// the same process: "open" (no cluster secret; the master signs no
// capabilities, so its node serves unchecked, as with an older master) and
// "secure" (a cluster secret, a tenant credential on every RPC, every TCP
// range and SSD key under a signed token). Gets of the same value on the
// two alternate in short rounds, and the overhead is the median of the
// rounds' p50 ratios, so the machine's drift between seconds cancels out.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_util.h"
#include "common/auth.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"
#include "tests/tls_test_files.h"

namespace kvpool {

namespace {

using bench::Percentile;
using bench::Sample;

// The arms, each against "open": a second open cluster (the noise floor:
// any "overhead" it shows is the machine's, not the code's), capabilities
// alone, then with auth.
constexpr int kArms = 5;
const char* const kArmNames[kArms] = {"open", "open-again", "caps", "caps+auth",
                                      "caps+auth+tls"};

struct CostRow {
  std::string op, path;
  uint64_t size;
  double p50_us[kArms];
  double overhead_pct[kArms];  // [0] unused
};

}  // namespace

int RunSecurityCostBench(const BenchOptions& opts) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(opts.dir.empty() ? "/tmp" : opts.dir) /
                       fmt::format("kvpool-security-bench-{}", getpid());
  fs::create_directories(dir);
  const std::string secret_file = (dir / "cluster.secret").string();
  const std::string cred_file = (dir / "tenant.cred").string();
  auto secret = auth::ClusterSecret::Generate();
  auto cred = auth::MakeCredential(secret, auth::Role::kTenant, "default");
  if (!cred.ok() ||
      !auth::WritePrivateFile(secret_file, secret.ToHex() + "\n").ok() ||
      !auth::WritePrivateFile(cred_file, auth::FormatCredentialFile(*cred))
           .ok()) {
    std::fprintf(stderr, "error: cannot write the secret files in %s\n",
                 dir.c_str());
    return 1;
  }

  const uint64_t max_size =
      *std::max_element(opts.transfer_sizes.begin(), opts.transfer_sizes.end());
  LocalClusterOptions open_opts;
  open_opts.num_nodes = 1;
  open_opts.segment_size = std::max<uint64_t>(256ull << 20, 64 * max_size);
  open_opts.data_capabilities = false;
  LocalClusterOptions again_opts = open_opts;
  again_opts.node_id_prefix = "again-node";
  LocalClusterOptions caps_opts = open_opts;
  caps_opts.data_capabilities = true;
  caps_opts.node_id_prefix = "caps-node";
  LocalClusterOptions secure_opts = caps_opts;
  secure_opts.node_id_prefix = "secure-node";
  secure_opts.cluster_secret_file = secret_file;
  // TLS on the data plane too (shared memory does not use it).
  TlsTestFiles tls;
  if (!tls.ok()) {
    std::fprintf(stderr, "error: cannot make TLS files (openssl missing?)\n");
    return 1;
  }
  LocalClusterOptions tls_opts = secure_opts;
  tls_opts.node_id_prefix = "tls-node";
  tls_opts.data_tls_cert_file = tls("server.pem");
  tls_opts.data_tls_key_file = tls("server.key");
  tls_opts.data_tls_ca_file = tls("ca.pem");
  LocalCluster open(open_opts), again(again_opts), caps(caps_opts),
      secure(secure_opts), with_tls(tls_opts);
  LocalCluster* clusters[kArms] = {&open, &again, &caps, &secure, &with_tls};
  for (int a = 0; a < kArms; ++a) {
    if (Status s = clusters[a]->Start(); !s.ok()) {
      std::fprintf(stderr, "%s cluster: %s\n", kArmNames[a],
                   s.ToString().c_str());
      return 1;
    }
  }

  std::vector<CostRow> rows;
  for (TransportMode mode : {TransportMode::kShm, TransportMode::kTcp}) {
    const char* path = mode == TransportMode::kShm ? "shm" : "tcp";
    std::unique_ptr<Client> owned[kArms];
    Client* clients[kArms];
    for (int a = 0; a < kArms; ++a) {
      ClientConfig cc;
      cc.transport = mode;
      if (a >= 3) cc.credential_file = cred_file;
      if (a == 4) cc.data_tls_ca_file = tls("ca.pem");
      auto c = clusters[a]->NewClient(cc);
      if (!c.ok()) {
        std::fprintf(stderr, "error: %s client: %s\n", kArmNames[a],
                     c.status().ToString().c_str());
        return 1;
      }
      owned[a] = std::move(c.value());
      clients[a] = owned[a].get();
    }
    for (uint64_t size : opts.transfer_sizes) {
      std::fprintf(stderr, "[%s %s] ...\n", path, FormatSize(size).c_str());
      std::string value(size, '\0');
      for (size_t i = 0; i < size; ++i) value[i] = char(i * 131 + 7);
      std::vector<uint8_t> dst(size);
      for (Client* c : clients) {
        bench::MustOk(c->RegisterBuffer(value.data(), value.size()),
                      "RegisterBuffer");
        bench::MustOk(c->RegisterBuffer(dst.data(), dst.size()),
                      "RegisterBuffer");
        if (!c->Put("v", value).ok()) {
          std::fprintf(stderr, "error: put failed\n");
          return 1;
        }
      }
      int n = 0;
      bool ok = true;
      auto put = [&](Client* c) {
        ok &= c->PutFrom(fmt::format("p{}", n++), value.data(), size).ok();
      };
      auto get = [&](Client* c) {
        ok &= c->GetInto("v", dst.data(), size).ok();
      };
      constexpr int kRounds = 2 * kArms;  // each arm in each place twice
      for (int op = 0; op < 2; ++op) {
        std::vector<double> ratios[kArms], lat[kArms];
        for (int round = 0; round < kRounds; ++round) {
          const double slice = opts.seconds_per_case / kRounds;
          double p50[kArms];
          for (int k = 0; k < kArms; ++k) {
            // The order turns each round, so no arm always runs first.
            const int which = (k + round) % kArms;
            Client* c = clients[which];
            auto s = op == 0 ? Sample(slice, 5, [&] { get(c); })
                             : Sample(slice, 5, [&] { put(c); });
            p50[which] = Percentile(s, 50);
            lat[which].insert(lat[which].end(), s.begin(), s.end());
          }
          for (int a = 1; a < kArms; ++a) ratios[a].push_back(p50[a] / p50[0]);
          // Puts fill the segment: start every round from an empty one.
          if (op == 1) {
            for (Client* c : clients)
              bench::MustOk(c->RemoveAll(true).status(), "RemoveAll");
            for (Client* c : clients) bench::MustOk(c->Put("v", value), "put");
          }
        }
        CostRow row{op == 0 ? "get" : "put", path, size, {}, {}};
        for (int a = 0; a < kArms; ++a) {
          row.p50_us[a] = Percentile(lat[a], 50) * 1e6;
          if (a == 0) continue;
          std::sort(ratios[a].begin(), ratios[a].end());
          row.overhead_pct[a] = (ratios[a][ratios[a].size() / 2] - 1) * 100;
        }
        rows.push_back(row);
      }
      if (!ok || std::string(dst.begin(), dst.end()) != value) {
        std::fprintf(stderr,
                     "error: a put or get failed, or a get read wrong bytes\n");
        return 1;
      }
      for (Client* c : clients) {
        bench::MustOk(c->RemoveAll(true).status(), "RemoveAll");
        bench::MustOk(c->UnregisterBuffer(value.data()), "UnregisterBuffer");
        bench::MustOk(c->UnregisterBuffer(dst.data()), "UnregisterBuffer");
      }
    }
  }
  std::printf(
      "\nkvpool bench transfer --security (five LocalClusters of 1 node in "
      "one process; open = no auth, no capabilities; open-again = the same, "
      "the noise floor; caps = capability on every TCP range; caps+auth = "
      "and a tenant credential on every RPC; +tls = and TLS on the data "
      "plane (shm does not use it); p50 us per arm, then each arm's "
      "overhead = median over 10 rounds, arms in turning order, of its p50 "
      "/ open p50 - 1)\n");
  std::printf("%-4s %-4s %7s %9s %9s %9s %9s %9s | %10s %8s %9s %9s\n", "op",
              "path", "size", "open", "again", "caps", "caps+auth", "+tls",
              "again(A/A)", "caps", "caps+auth", "+tls");
  for (const auto& r : rows) {
    std::printf(
        "%-4s %-4s %7s %9.1f %9.1f %9.1f %9.1f %9.1f | %9.1f%% %7.1f%% "
        "%8.1f%% %8.1f%%\n",
        r.op.c_str(), r.path.c_str(), FormatSize(r.size).c_str(), r.p50_us[0],
        r.p50_us[1], r.p50_us[2], r.p50_us[3], r.p50_us[4], r.overhead_pct[1],
        r.overhead_pct[2], r.overhead_pct[3], r.overhead_pct[4]);
  }
  std::printf("target: <= 3%% on 1 MiB gets, shm and tcp\n");
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"op":"{}","path":"{}","size":{},"open_p50_us":{:.1f},)"
                 R"("again_p50_us":{:.1f},"caps_p50_us":{:.1f},)"
                 R"("caps_auth_p50_us":{:.1f},"tls_p50_us":{:.1f},)"
                 R"("again_overhead_pct":{:.2f},"caps_overhead_pct":{:.2f},)"
                 R"("caps_auth_overhead_pct":{:.2f},"tls_overhead_pct":{:.2f}}})",
                 r.op, r.path, r.size, r.p50_us[0], r.p50_us[1], r.p50_us[2],
                 r.p50_us[3], r.p50_us[4], r.overhead_pct[1], r.overhead_pct[2],
                 r.overhead_pct[3], r.overhead_pct[4]);
    }
    out << "]\n";
  }
  for (LocalCluster* c : clusters) c->Stop();
  fs::remove_all(dir);
  return 0;
}

}  // namespace kvpool
