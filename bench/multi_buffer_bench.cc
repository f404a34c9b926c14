// kvpool bench transfer --multi-buffer: the scatter/gather calls (one value
// written from, or read into, several caller buffers: per-layer K and V
// pages) beside the single-buffer calls moving the same bytes, in the same
// run and in alternating rounds, on shared memory and TCP. The ratio is the
// median over the rounds of single p50 / multi p50 (>= 100% means the
// multi-buffer form is as fast).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <tuple>

#include "bench/bench_main.h"
#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"

namespace kvpool {

namespace {
using bench::Percentile;
using bench::Sample;

constexpr int kRounds = 5;

struct MultiRow {
  std::string op, path;
  uint64_t size = 0;
  int parts = 0, batch = 0;
  double single_p50_us = 0, multi_p50_us = 0, ratio = 0;
};
}  // namespace

int RunMultiBufferBench(const BenchOptions& opts) {
  const int batch = 16;
  const std::vector<int> part_counts = {2, 8};
  uint64_t max_size = 0;
  for (uint64_t s : opts.transfer_sizes) max_size = std::max(max_size, s);
  const uint64_t max_bytes = max_size * batch;
  if (max_bytes > (512ull << 20)) {
    std::fprintf(stderr, "error: size x 16 above 512 MiB\n");
    return 1;
  }
  LocalClusterOptions lco;
  lco.num_nodes = 1;
  lco.segment_size = 1ull << 30;
  LocalCluster cluster(lco);
  if (Status s = cluster.Start(); !s.ok()) {
    std::fprintf(stderr, "cluster: %s\n", s.ToString().c_str());
    return 1;
  }
  ClientConfig shm_cfg, tcp_cfg;
  shm_cfg.transport = TransportMode::kShm;
  tcp_cfg.transport = TransportMode::kTcp;
  auto shm = cluster.NewClient(shm_cfg);
  auto tcp = cluster.NewClient(tcp_cfg);
  if (!shm.ok() || !tcp.ok()) return 1;
  std::vector<uint8_t> src(max_bytes), dst(max_bytes);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (auto* c : {shm.value().get(), tcp.value().get()}) {
    bench::MustOk(c->RegisterBuffer(src.data(), src.size()), "RegisterBuffer");
    bench::MustOk(c->RegisterBuffer(dst.data(), dst.size()), "RegisterBuffer");
  }

  std::vector<MultiRow> rows;
  bool verified = true;
  int case_no = 0;
  const int cases = int(opts.transfer_sizes.size() * part_counts.size()) * 2;
  for (uint64_t size : opts.transfer_sizes) {
    for (int parts : part_counts) {
      for (auto [path, client] : {std::pair{"shm", shm.value().get()},
                                  std::pair{"tcp", tcp.value().get()}}) {
        std::fprintf(stderr, "[%d/%d] %s %s in %d parts x %d ...\n", ++case_no,
                     cases, path, FormatSize(size).c_str(), parts, batch);
        // Value j of the batch is the bytes at src + j * size; the
        // multi-buffer form takes them as `parts` equal slices (the last
        // takes the remainder).
        const uint64_t part = size / uint64_t(parts);
        std::vector<const void*> whole_src;
        std::vector<void*> whole_dst;
        std::vector<uint64_t> lens(batch, size);
        std::vector<std::vector<ConstSlice>> src_parts(batch), dst_parts(batch);
        for (int j = 0; j < batch; ++j) {
          const uint64_t base = uint64_t(j) * size;
          whole_src.push_back(src.data() + base);
          whole_dst.push_back(dst.data() + base);
          for (int k = 0; k < parts; ++k) {
            const uint64_t off = uint64_t(k) * part;
            const uint64_t len = k + 1 == parts ? size - off : part;
            src_parts[j].push_back({src.data() + base + off, len});
            dst_parts[j].push_back({dst.data() + base + off, len});
          }
        }
        int round_no = 0;
        auto fresh_keys = [&](const char* tag) {
          std::vector<std::string> keys;
          for (int j = 0; j < batch; ++j)
            keys.push_back(
                fmt::format("mb-{}-{}-{}-{}-{}", tag, path, size, round_no, j));
          ++round_no;
          return keys;
        };
        auto put_single = [&] {
          for (const auto& s :
               client->BatchPutFrom(fresh_keys("s"), whole_src, lens))
            verified &= s.ok();
        };
        auto put_multi = [&] {
          for (const auto& s :
               client->BatchPutFromParts(fresh_keys("m"), src_parts))
            verified &= s.ok();
        };
        std::vector<std::string> get_keys;
        for (int j = 0; j < batch; ++j)
          get_keys.push_back(fmt::format("mb-get-{}-{}-{}", path, size, j));
        for (const auto& s : client->BatchPutFrom(get_keys, whole_src, lens))
          verified &= s.ok();
        auto get_single = [&] {
          for (const auto& r : client->BatchGetInto(get_keys, whole_dst, lens))
            verified &= r.ok();
        };
        auto get_multi = [&] {
          for (const auto& r : client->BatchGetIntoParts(get_keys, dst_parts))
            verified &= r.ok();
        };
        for (auto [op, single, multi] :
             {std::tuple{"put", std::function<void()>(put_single),
                         std::function<void()>(put_multi)},
              std::tuple{"get", std::function<void()>(get_single),
                         std::function<void()>(get_multi)}}) {
          std::vector<double> s_all, m_all, ratios;
          for (int r = 0; r < kRounds; ++r) {
            const double slice = opts.seconds_per_case / kRounds;
            std::vector<double> s, m;
            if (r % 2 == 0) {
              s = Sample(slice, 5, single);
              m = Sample(slice, 5, multi);
            } else {
              m = Sample(slice, 5, multi);
              s = Sample(slice, 5, single);
            }
            ratios.push_back(Percentile(s, 50) / Percentile(m, 50));
            s_all.insert(s_all.end(), s.begin(), s.end());
            m_all.insert(m_all.end(), m.begin(), m.end());
            if (std::string(op) == "put") (void)client->RemoveAll(true);
          }
          std::sort(ratios.begin(), ratios.end());
          rows.push_back(MultiRow{
              op, path, size, parts, batch, Percentile(s_all, 50) * 1e6,
              Percentile(m_all, 50) * 1e6, ratios[ratios.size() / 2]});
          if (std::string(op) == "put") {
            // The puts' keys are gone; the gets' were put again below.
            for (const auto& s :
                 client->BatchPutFrom(get_keys, whole_src, lens))
              verified &= s.ok();
          }
        }
        verified &= std::memcmp(src.data(), dst.data(), size * batch) == 0;
        std::memset(dst.data(), 0, size * batch);
        (void)client->RemoveAll(true);
      }
    }
  }
  if (!verified) {
    std::fprintf(stderr, "error: a call failed or read wrong bytes\n");
    return 1;
  }
  std::printf(
      "\nkvpool bench transfer --multi-buffer (1 node, batch %d; one value "
      "= N equal parts in separate buffers; ratio = median over %d "
      "alternating rounds of single p50 / multi p50)\n",
      batch, kRounds);
  std::printf("%-4s %-5s %8s %6s %14s %14s %8s\n", "op", "path", "size",
              "parts", "single_p50_us", "multi_p50_us", "ratio");
  for (const auto& r : rows) {
    std::printf("%-4s %-5s %8s %6d %14.1f %14.1f %7.0f%%\n", r.op.c_str(),
                r.path.c_str(), FormatSize(r.size).c_str(), r.parts,
                r.single_p50_us, r.multi_p50_us, r.ratio * 100);
  }
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"op":"{}","path":"{}","size":{},"parts":{},"batch":{},)"
                 R"("single_p50_us":{:.1f},"multi_p50_us":{:.1f},"ratio":{:.3f}}})",
                 r.op, r.path, r.size, r.parts, r.batch, r.single_p50_us,
                 r.multi_p50_us, r.ratio);
    }
    out << "]\n";
  }
  return 0;
}

}  // namespace kvpool
