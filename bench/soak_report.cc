#include "bench/soak_report.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "bench/svg_chart.h"

namespace kvpool::soak {

namespace {

double MiB(uint64_t b) { return double(b) / (1 << 20); }

// Mean RSS (MiB) of samples [begin, end) for process `p`.
double MeanRss(const std::vector<Sample>& s, size_t begin, size_t end,
               size_t p) {
  if (begin >= end) return 0;
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += MiB(s[i].procs[p].rss_bytes);
  return sum / double(end - begin);
}

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      o += fmt::format("\\u{:04x}", int(c));
    } else {
      o += c;
    }
  }
  return o + "\"";
}

}  // namespace

std::string Report::ProgressLine(const Sample& s, double total_sec) const {
  std::string rss, fds, thr;
  for (size_t p = 0; p < proc_names.size(); ++p) {
    const ProcSample& ps = s.procs[p];
    rss += fmt::format(" {} {:.0f}", proc_names[p], MiB(ps.rss_bytes));
    fds += fmt::format("{}{}", p ? "/" : "", ps.fds);
    thr += fmt::format("{}{}", p ? "/" : "", ps.threads);
  }
  return fmt::format(
      "[{:5.0f}s/{:.0f}s] ops/s {:6.0f} | put/s {:5.0f} p50/p99 {:.1f}/{:.1f} "
      "ms | get/s {:5.0f} p50/p99 {:.1f}/{:.1f} ms | RSS MiB{} | fds {} | "
      "threads {} | ssd {:.0f} MiB | wrong reads {}",
      s.t_sec, total_sec, s.ops_per_sec, s.put_per_sec, s.put_p50_ms,
      s.put_p99_ms, s.get_per_sec, s.get_p50_ms, s.get_p99_ms, rss, fds, thr,
      MiB(s.ssd_bytes), s.wrong_reads);
}

void Report::PrintTable() const {
  std::printf("\nkvpool bench soak: %d clients, %.0f s, %zu samples\n", clients,
              seconds, samples.size());
  std::string head =
      fmt::format("{:>6} {:>7} {:>6} {:>7} {:>8} {:>6} {:>7} {:>8} {:>7} {:>7}",
                  "t_s", "ops/s", "put/s", "put_p50", "put_p99", "get/s",
                  "get_p50", "get_p99", "wr_MB/s", "rd_MB/s");
  for (const auto& n : proc_names) head += fmt::format(" {:>9}", n + "_MiB");
  head += fmt::format(" {:>14} {:>14} {:>8}", "fds", "threads", "ssd_MiB");
  std::printf("%s\n", head.c_str());
  for (const Sample& s : samples) {
    std::string row = fmt::format(
        "{:6.0f} {:7.0f} {:6.0f} {:7.1f} {:8.1f} {:6.0f} {:7.1f} {:8.1f} "
        "{:7.0f} {:7.0f}",
        s.t_sec, s.ops_per_sec, s.put_per_sec, s.put_p50_ms, s.put_p99_ms,
        s.get_per_sec, s.get_p50_ms, s.get_p99_ms, s.write_mb_per_sec,
        s.read_mb_per_sec);
    std::string fds, thr;
    for (size_t p = 0; p < s.procs.size(); ++p) {
      row += fmt::format(" {:9.1f}", MiB(s.procs[p].rss_bytes));
      fds += fmt::format("{}{}", p ? "/" : "", s.procs[p].fds);
      thr += fmt::format("{}{}", p ? "/" : "", s.procs[p].threads);
    }
    row += fmt::format(" {:>14} {:>14} {:8.0f}", fds, thr, MiB(s.ssd_bytes));
    std::printf("%s\n", row.c_str());
  }
  std::printf("(latencies in ms per call; fds and threads: %s)\n",
              [&] {
                std::string n;
                for (size_t p = 0; p < proc_names.size(); ++p)
                  n += (p ? "/" : "") + proc_names[p];
                return n;
              }()
                  .c_str());
  std::string c;
  for (const auto& [op, n] : calls) c += fmt::format(" {} {}", op, n);
  std::printf("calls:%s\n", c.c_str());
  std::printf(
      "reads: %llu hits (correct values), %llu misses (OBJECT_NOT_FOUND)\n",
      (unsigned long long)hits, (unsigned long long)misses);
  std::string e;
  for (const auto& [what, n] : errors) e += fmt::format(" {} {}", what, n);
  std::printf("errors (not wrong reads):%s\n", e.empty() ? " none" : e.c_str());
  std::printf("master at the end: %llu objects, %llu evictions\n",
              (unsigned long long)objects, (unsigned long long)evictions);
}

std::vector<Growth> Report::ComputeGrowth() const {
  std::vector<Growth> out;
  const size_t n = samples.size();
  if (n < 3) return out;
  const size_t a = n / 3, b = 2 * n / 3;
  for (size_t p = 0; p < proc_names.size(); ++p) {
    Growth g;
    g.name = proc_names[p];
    g.first_mib = MeanRss(samples, 0, a, p);
    g.middle_mib = MeanRss(samples, a, b, p);
    g.last_mib = MeanRss(samples, b, n, p);
    g.change = g.middle_mib > 0 ? g.last_mib / g.middle_mib - 1 : 0;
    g.verdict = std::fabs(g.change) <= growth_tolerance
                    ? "flat"
                    : (g.change > 0 ? "growing" : "shrinking");
    g.fds_first = samples.front().procs[p].fds;
    g.fds_last = samples.back().procs[p].fds;
    g.threads_first = samples.front().procs[p].threads;
    g.threads_last = samples.back().procs[p].threads;
    out.push_back(g);
  }
  return out;
}

std::string Report::PrintVerdict() const {
  const std::vector<Growth> growth = ComputeGrowth();
  std::printf(
      "\nRSS by thirds of the samples (mean MiB; verdict: last third "
      "within %.0f%% of the middle third):\n",
      growth_tolerance * 100);
  std::string memory = growth.empty() ? "too few samples" : "flat";
  for (size_t p = 0; p < growth.size(); ++p) {
    const Growth& g = growth[p];
    const bool server = p < num_servers;
    std::printf(
        "  %-7s first %8.1f  middle %8.1f  last %8.1f  (%+.1f%%) %s%s  fds "
        "%d->%d threads %d->%d\n",
        g.name.c_str(), g.first_mib, g.middle_mib, g.last_mib, g.change * 100,
        g.verdict.c_str(), server ? "" : " (not judged: the load itself)",
        g.fds_first, g.fds_last, g.threads_first, g.threads_last);
    if (!server || g.verdict == "flat") continue;
    if (g.verdict == "growing" || memory == "flat") memory = g.verdict;
  }
  std::string detail;
  if (memory != "flat") {
    for (size_t p = 0; p < growth.size() && p < num_servers; ++p) {
      if (growth[p].verdict != "flat") {
        detail += fmt::format(" {} {:.1f} -> {:.1f} MiB ({:+.1f}%)",
                              growth[p].name, growth[p].middle_mib,
                              growth[p].last_mib, growth[p].change * 100);
      }
    }
  }
  std::printf("VERDICT: memory %s%s; wrong reads %llu%s\n", memory.c_str(),
              detail.c_str(), (unsigned long long)wrong_reads,
              failures.empty() ? "" : "; FAILED");
  for (const auto& f : failures) std::printf("  failure: %s\n", f.c_str());
  return memory;
}

bool Report::WriteJson(const std::string& path) const {
  std::ofstream out(path);
  if (!out) {
    std::fprintf(stderr, "error: cannot write %s\n", path.c_str());
    return false;
  }
  out << fmt::format(R"({{"clients":{},"seconds":{:.1f},"hits":{},"misses":{},)"
                     R"("wrong_reads":{},"objects":{},"evictions":{},)",
                     clients, seconds, hits, misses, wrong_reads, objects,
                     evictions);
  out << "\"calls\":{";
  bool first = true;
  for (const auto& [op, n] : calls) {
    out << (first ? "" : ",") << JsonString(op) << ":" << n;
    first = false;
  }
  out << "},\"errors\":{";
  first = true;
  for (const auto& [what, n] : errors) {
    out << (first ? "" : ",") << JsonString(what) << ":" << n;
    first = false;
  }
  out << "},\"failures\":[";
  for (size_t i = 0; i < failures.size(); ++i)
    out << (i ? "," : "") << JsonString(failures[i]);
  out << "],\"growth\":[";
  const auto growth = ComputeGrowth();
  for (size_t i = 0; i < growth.size(); ++i) {
    const Growth& g = growth[i];
    out << (i ? "," : "")
        << fmt::format(
               R"({{"process":{},"first_mib":{:.2f},"middle_mib":{:.2f},)"
               R"("last_mib":{:.2f},"change":{:.4f},"verdict":{},"judged":{}}})",
               JsonString(g.name), g.first_mib, g.middle_mib, g.last_mib,
               g.change, JsonString(g.verdict),
               i < num_servers ? "true" : "false");
  }
  out << "],\"samples\":[";
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    out << (i ? "," : "")
        << fmt::format(
               R"({{"t_sec":{:.1f},"ops_per_sec":{:.1f},"put_per_sec":{:.1f},)"
               R"("get_per_sec":{:.1f},"put_p50_ms":{:.3f},"put_p99_ms":{:.3f},)"
               R"("get_p50_ms":{:.3f},"get_p99_ms":{:.3f},"write_mb_per_sec":{:.1f},)"
               R"("read_mb_per_sec":{:.1f},"ssd_bytes":{},"wrong_reads":{},"procs":{{)",
               s.t_sec, s.ops_per_sec, s.put_per_sec, s.get_per_sec,
               s.put_p50_ms, s.put_p99_ms, s.get_p50_ms, s.get_p99_ms,
               s.write_mb_per_sec, s.read_mb_per_sec, s.ssd_bytes,
               s.wrong_reads);
    for (size_t p = 0; p < s.procs.size(); ++p) {
      out << (p ? "," : "")
          << fmt::format(R"({}:{{"rss_bytes":{},"fds":{},"threads":{}}})",
                         JsonString(proc_names[p]), s.procs[p].rss_bytes,
                         s.procs[p].fds, s.procs[p].threads);
    }
    out << "}}";
  }
  out << "]}\n";
  return bool(out);
}

bool Report::WriteSvgs(const std::string& prefix) const {
  std::vector<bench::LineSeries> rss;
  for (size_t p = 0; p < proc_names.size(); ++p) {
    bench::LineSeries ls{proc_names[p], {}};
    for (const Sample& s : samples)
      ls.points.emplace_back(s.t_sec / 60, MiB(s.procs[p].rss_bytes));
    rss.push_back(std::move(ls));
  }
  bench::LineSeries put{"put p99", {}}, get{"get p99", {}};
  for (const Sample& s : samples) {
    put.points.emplace_back(s.t_sec / 60, s.put_p99_ms);
    get.points.emplace_back(s.t_sec / 60, s.get_p99_ms);
  }
  const std::string title = fmt::format(
      "kvpool bench soak ({} clients, {:.0f} min)", clients, seconds / 60);
  bool ok = bench::WriteFile(prefix + "_rss.svg",
                             bench::LineChartSvg(title + ": RSS per process",
                                                 "minutes", "RSS (MiB)", rss));
  ok &= bench::WriteFile(
      prefix + "_p99.svg",
      bench::LineChartSvg(title + ": p99 latency per sampling interval",
                          "minutes", "p99 (ms)", {put, get}));
  return ok;
}

}  // namespace kvpool::soak
