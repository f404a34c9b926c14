// kvpool bench transfer: put/get throughput and latency through the real
// client, master and node (LocalCluster), on the shared-memory and the TCP
// path, beside two baselines measured in the same run: a single-thread
// memcpy of the same bytes, and a raw loopback TCP copy (request/response,
// no kvpool code) of the same bytes.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "bench/bench_main.h"
#include "bench/svg_chart.h"
#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "kvpool/local_cluster.h"

namespace kvpool {

namespace {

using bench::Percentile;
using bench::Sample;

// Raw loopback copy: the client asks for N bytes, the server writes them.
class RawTcpCopy {
 public:
  explicit RawTcpCopy(uint64_t max_bytes) : src_(max_bytes, 'x') {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    listen(listen_fd_, 1);
    server_ = std::thread([this] { Serve(); });
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    Tune(fd_);
    connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ~RawTcpCopy() {
    uint64_t zero = 0;
    (void)!write(fd_, &zero, 8);
    close(fd_);
    server_.join();
    close(listen_fd_);
  }
  void Copy(uint8_t* dst, uint64_t n) {
    (void)!write(fd_, &n, 8);
    uint64_t got = 0;
    while (got < n) {
      ssize_t r = read(fd_, dst + got, n - got);
      if (r <= 0) return;
      got += uint64_t(r);
    }
  }

 private:
  static void Tune(int fd) {
    int one = 1, buf = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  }
  void Serve() {
    int c = accept(listen_fd_, nullptr, nullptr);
    Tune(c);
    for (;;) {
      uint64_t n = 0;
      if (read(c, &n, 8) != 8 || n == 0) break;
      uint64_t sent = 0;
      while (sent < n) {
        ssize_t w = write(c, src_.data() + sent, n - sent);
        if (w <= 0) break;
        sent += uint64_t(w);
      }
    }
    close(c);
  }
  std::string src_;
  int listen_fd_ = -1, fd_ = -1;
  std::thread server_;
};

struct Row {
  std::string op, path;
  uint64_t size;
  int batch;
  double gbps, p50_us, p99_us, baseline_gbps, ratio;
  std::string baseline;
};

double Gbps(uint64_t bytes, double sec) {
  return sec > 0 ? double(bytes) / sec / 1e9 : 0;
}

}  // namespace

int RunTransferBench(const BenchOptions& opts) {
  const std::vector<uint64_t>& sizes = opts.transfer_sizes;
  const std::vector<int>& batches = opts.transfer_batches;
  if (sizes.empty() || batches.empty()) {
    std::fprintf(stderr, "error: no sizes or no batches to run\n");
    return 1;
  }
  const uint64_t max_bytes =
      *std::max_element(sizes.begin(), sizes.end()) *
      uint64_t(*std::max_element(batches.begin(), batches.end()));
  if (max_bytes > (512ull << 20)) {
    std::fprintf(stderr, "error: size x batch above 512 MiB\n");
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
  ClientConfig shm_lc_cfg = shm_cfg, tcp_lc_cfg = tcp_cfg;
  shm_lc_cfg.lease_cache = true;
  tcp_lc_cfg.lease_cache = true;
  auto shm_client = cluster.NewClient(shm_cfg);
  auto tcp_client = cluster.NewClient(tcp_cfg);
  auto shm_lc_client = cluster.NewClient(shm_lc_cfg);
  auto tcp_lc_client = cluster.NewClient(tcp_lc_cfg);
  if (!shm_client.ok() || !tcp_client.ok() || !shm_lc_client.ok() ||
      !tcp_lc_client.ok())
    return 1;

  std::vector<uint8_t> src(max_bytes), dst(max_bytes);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<uint8_t>(i * 131 + 7);
  std::memset(dst.data(), 0, dst.size());
  std::vector<uint8_t> scratch(max_bytes, 0);
  // The memcpy baseline reads from page-aligned memory, as a get reads from
  // a segment: memcpy's speed depends on how source and destination sit
  // within their pages (4 KiB aliasing), so both sides copy with the same
  // alignment into buffers like dst.
  std::unique_ptr<uint8_t, decltype(&std::free)> page_src(
      static_cast<uint8_t*>(std::aligned_alloc(4096, max_bytes)), &std::free);
  std::memcpy(page_src.get(), src.data(), max_bytes);
  for (auto* c : {shm_client.value().get(), tcp_client.value().get(),
                  shm_lc_client.value().get(), tcp_lc_client.value().get()}) {
    bench::MustOk(c->RegisterBuffer(src.data(), src.size()), "RegisterBuffer");
    bench::MustOk(c->RegisterBuffer(dst.data(), dst.size()), "RegisterBuffer");
  }
  RawTcpCopy raw(max_bytes);

  std::vector<Row> rows;
  int case_no = 0;
  const int total_cases = int(sizes.size() * batches.size());
  for (uint64_t size : sizes) {
    for (int batch : batches) {
      ++case_no;
      std::fprintf(stderr, "[%d/%d] %s x %d ...\n", case_no, total_cases,
                   FormatSize(size).c_str(), batch);
      const uint64_t bytes = size * uint64_t(batch);
      auto memcpy_lat = Sample(opts.seconds_per_case / 4, 20, [&] {
        std::memcpy(scratch.data(), page_src.get(), bytes);
        asm volatile("" ::: "memory");
      });
      auto raw_lat = Sample(opts.seconds_per_case / 4, 20,
                            [&] { raw.Copy(scratch.data(), bytes); });
      double memcpy_gbps = Gbps(bytes, Percentile(memcpy_lat, 50));
      double raw_gbps = Gbps(bytes, Percentile(raw_lat, 50));

      for (auto [path, client] :
           {std::pair{"shm", shm_client.value().get()},
            std::pair{"tcp", tcp_client.value().get()},
            std::pair{"shm+lc", shm_lc_client.value().get()},
            std::pair{"tcp+lc", tcp_lc_client.value().get()}}) {
        // "+lc": the same path with the client's lease cache (repeated gets
        // of a key within its lease skip the master round trip).
        const bool lease_cached =
            std::string(path).find("+lc") != std::string::npos;
        std::vector<const void*> srcs;
        std::vector<void*> dsts;
        std::vector<uint64_t> lens(batch, size);
        for (int j = 0; j < batch; ++j) {
          srcs.push_back(src.data() + uint64_t(j) * size);
          dsts.push_back(dst.data() + uint64_t(j) * size);
        }
        int round = 0;
        std::vector<std::string> keys;
        auto put_lat = Sample(opts.seconds_per_case / 2, 10, [&] {
          keys.clear();
          for (int j = 0; j < batch; ++j) {
            keys.push_back(
                fmt::format("put-{}-{}-{}-{}", path, size, round, j));
          }
          ++round;
          client->BatchPutFrom(keys, srcs, lens);
        });
        bench::MustOk(client->RemoveAll(true).status(), "RemoveAll");
        // Keys to read: put once, read many times.
        keys.clear();
        for (int j = 0; j < batch; ++j)
          keys.push_back(fmt::format("get-{}-{}-{}", path, size, j));
        client->BatchPutFrom(keys, srcs, lens);
        bool verified = true;
        const bool is_shm = std::string(path).rfind("shm", 0) == 0;
        auto get_once = [&] {
          auto r = client->BatchGetInto(keys, dsts, lens);
          for (const auto& x : r) verified &= x.ok();
        };
        // Into a buffer of its own, so that dst keeps what the gets read.
        auto base_once = [&] {
          if (is_shm) {
            std::memcpy(scratch.data(), page_src.get(), bytes);
            asm volatile("" ::: "memory");
          } else {
            raw.Copy(scratch.data(), bytes);
          }
        };
        // Gets and their baseline alternate in short rounds, and the ratio
        // is the median of the rounds' ratios: the machine's speed drifts
        // between seconds, and a baseline measured once, earlier, would
        // carry that drift into the ratio.
        constexpr int kRounds = 5;
        std::vector<double> get_lat, base_lat, ratios;
        for (int round = 0; round < kRounds; ++round) {
          const double slice = opts.seconds_per_case / 2 / kRounds;
          std::vector<double> g, b;
          if (round % 2 == 0) {
            g = Sample(slice, 5, get_once);
            b = Sample(slice, 5, base_once);
          } else {
            b = Sample(slice, 5, base_once);
            g = Sample(slice, 5, get_once);
          }
          ratios.push_back(Percentile(b, 50) / Percentile(g, 50));
          get_lat.insert(get_lat.end(), g.begin(), g.end());
          base_lat.insert(base_lat.end(), b.begin(), b.end());
        }
        std::sort(ratios.begin(), ratios.end());
        verified &= std::memcmp(src.data(), dst.data(), bytes) == 0;
        if (!verified) {
          std::fprintf(stderr, "error: %s get returned wrong bytes or failed\n",
                       path);
          return 1;
        }
        const double base = is_shm ? memcpy_gbps : raw_gbps;
        if (!lease_cached) {  // puts do not use the lease cache
          const double g = Gbps(bytes, Percentile(put_lat, 50));
          rows.push_back(
              Row{"put", path, size, batch, g, Percentile(put_lat, 50) * 1e6,
                  Percentile(put_lat, 99) * 1e6, base, base > 0 ? g / base : 0,
                  is_shm ? "memcpy" : "raw_tcp"});
        }
        rows.push_back(
            Row{"get", path, size, batch, Gbps(bytes, Percentile(get_lat, 50)),
                Percentile(get_lat, 50) * 1e6, Percentile(get_lat, 99) * 1e6,
                Gbps(bytes, Percentile(base_lat, 50)),
                ratios[ratios.size() / 2], is_shm ? "memcpy" : "raw_tcp"});
        bench::MustOk(client->RemoveAll(true).status(), "RemoveAll");
      }
    }
  }

  std::printf(
      "\nkvpool bench transfer (LocalCluster, 1 node; GB/s from the median "
      "call; get ratio = median over 5 alternating rounds of baseline "
      "p50 / get p50, put ratio against the case's first baseline)\n");
  std::printf("%-4s %-6s %7s %5s %9s %10s %10s %-8s %9s %7s\n", "op", "path",
              "size", "batch", "GB/s", "p50_us", "p99_us", "baseline",
              "base_GB/s", "ratio");
  for (const auto& r : rows) {
    std::printf("%-4s %-6s %7s %5d %9.2f %10.1f %10.1f %-8s %9.2f %6.0f%%\n",
                r.op.c_str(), r.path.c_str(), FormatSize(r.size).c_str(),
                r.batch, r.gbps, r.p50_us, r.p99_us, r.baseline.c_str(),
                r.baseline_gbps, r.ratio * 100);
  }
  std::printf(
      "targets: shm get >= 80%% of memcpy; tcp get >= 70%% of raw_tcp\n");
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"op":"{}","path":"{}","size":{},"batch":{},"gbps":{:.3f},)"
                 R"("p50_us":{:.1f},"p99_us":{:.1f},"baseline":"{}","baseline_gbps":{:.3f},)"
                 R"("ratio":{:.3f}}})",
                 r.op, r.path, r.size, r.batch, r.gbps, r.p50_us, r.p99_us,
                 r.baseline, r.baseline_gbps, r.ratio);
    }
    out << "]\n";
  }
  if (!opts.svg_path.empty()) {
    std::vector<bench::BarGroup> groups;
    for (const auto& r : rows) {
      groups.push_back(bench::BarGroup{fmt::format("{} {} {} x{}", r.op, r.path,
                                                   FormatSize(r.size), r.batch),
                                       {r.gbps, r.baseline_gbps}});
    }
    bench::WriteFile(
        opts.svg_path,
        bench::BarChartSvg(
            "kvpool bench transfer: GB/s (median call)", "GB/s",
            {"kvpool", "baseline (memcpy for shm, raw TCP for tcp)"}, groups));
  }
  cluster.Stop();
  return 0;
}

}  // namespace kvpool
