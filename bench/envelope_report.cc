#include "bench/envelope_report.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "bench/svg_chart.h"

namespace kvpool::bench {

namespace {
double Millions(uint64_t n) { return double(n) / 1e6; }

std::string HoldJson(const HoldStats& h) {
  return fmt::format(
      R"({{"max_ms":{:.3f},"p999_ms":{:.3f},"holds":{},"over_8ms":{},)"
      R"("cpu_max_ms":{:.3f},"cpu_p999_ms":{:.3f},"cpu_over_8ms":{}}})",
      h.max_ms, h.p999_ms, h.holds, h.over_8ms, h.cpu_max_ms, h.cpu_p999_ms,
      h.cpu_over_8ms);
}

double RateOf(const EnvelopeStep& s, int batch, int threads) {
  for (const auto& l : s.lookups) {
    if (l.batch == batch && l.threads == threads) return l.keys_per_s;
  }
  return 0;
}
}  // namespace

void PrintEnvelopeTable(const EnvelopeOptions& opts,
                        const std::vector<EnvelopeStep>& steps) {
  std::printf(
      "\nkvpool bench master-envelope (in-process MasterService, %d fake "
      "nodes, 4 KiB values, keys like key-0000000001)\n",
      opts.nodes);
  std::printf("%-10s %8s %8s %10s %9s %9s %9s", "objects", "B/obj", "RSS/obj",
              "put k/s", "put p99", "put max", "fill s");
  for (int b : opts.lookup_batches) {
    for (int t : opts.lookup_threads) {
      std::printf(" %10s", fmt::format("b{}t{} k/s", b, t).c_str());
    }
  }
  std::printf("\n");
  for (const auto& s : steps) {
    std::printf("%-10lu %8.1f %8.1f %10.0f %7.0fus %7.0fus %9.1f", s.objects,
                s.bytes_per_object, s.rss_bytes_per_object, s.put_keys_per_s,
                s.put_p99_us, s.put_max_us, s.fill_s);
    for (int b : opts.lookup_batches) {
      for (int t : opts.lookup_threads) {
        std::printf(" %10.0f", RateOf(s, b, t) / 1e3);
      }
    }
    std::printf("\n");
  }
  std::printf("\n%-10s %9s %9s %10s %9s %10s %12s %10s %10s %10s\n", "objects",
              "hb us", "hb p99", "housek ms", "evicted", "evict ms",
              "dead node obj", "death ms", "restart s", "restart k/s");
  for (const auto& s : steps) {
    std::printf(
        "%-10lu %9.1f %9.1f %10.1f %9lu %10.1f %12lu %10.1f %10.2f %10.0f\n",
        s.objects, s.heartbeat_us, s.heartbeat_p99_us, s.housekeep_ms,
        s.evicted_objects, s.evict_ms, s.node_objects, s.node_death_ms,
        s.restart_s,
        s.restart_s > 0 ? double(s.restart_objects) / s.restart_s / 1e3 : 0);
  }
  std::printf(
      "\nshard-lock holds per phase: longest / p99.9 bucket bound (ms) / "
      "holds of 8.4 ms or more (a preempted holder's hold includes its wait "
      "for a core)\n");
  std::printf("%-10s %18s %18s %18s %18s %18s %18s\n", "objects", "fill",
              "lookup", "housekeeping", "eviction", "node death", "restart");
  auto cell = [](const HoldStats& h) {
    return fmt::format("{:.1f}/{:.2f}/{}", h.max_ms, h.p999_ms, h.over_8ms);
  };
  for (const auto& s : steps) {
    std::printf("%-10lu %18s %18s %18s %18s %18s %18s\n", s.objects,
                cell(s.hold_fill).c_str(), cell(s.hold_lookup).c_str(),
                cell(s.hold_housekeep).c_str(), cell(s.hold_evict).c_str(),
                cell(s.hold_node_death).c_str(), cell(s.hold_restart).c_str());
  }
  std::printf(
      "\nthe same in the holder's thread CPU time (the work under the lock; "
      "preemption does not count)\n");
  auto cpu_cell = [](const HoldStats& h) {
    return fmt::format("{:.1f}/{:.2f}/{}", h.cpu_max_ms, h.cpu_p999_ms,
                       h.cpu_over_8ms);
  };
  for (const auto& s : steps) {
    std::printf(
        "%-10lu %18s %18s %18s %18s %18s %18s\n", s.objects,
        cpu_cell(s.hold_fill).c_str(), cpu_cell(s.hold_lookup).c_str(),
        cpu_cell(s.hold_housekeep).c_str(), cpu_cell(s.hold_evict).c_str(),
        cpu_cell(s.hold_node_death).c_str(), cpu_cell(s.hold_restart).c_str());
  }
  std::printf(
      "\nlookups at batch 1, 1 thread, with the hold tracker off / on "
      "(best of 3 alternating runs)\n");
  for (const auto& s : steps) {
    std::printf("%-10lu %12.0f %12.0f keys/s\n", s.objects,
                s.lookup_untracked_keys_per_s, s.lookup_tracked_keys_per_s);
  }
  std::printf(
      "targets: <= 160 B/object; >= 500k keys/s at batch 128 at the largest "
      "N; no shard-lock hold over 10 ms; 10M re-registered in <= 30 s\n");
}

bool WriteEnvelopeJson(const std::string& path, const EnvelopeOptions& opts,
                       const std::vector<EnvelopeStep>& steps) {
  std::ofstream out(path);
  if (!out) {
    std::fprintf(stderr, "bench: cannot write %s\n", path.c_str());
    return false;
  }
  out << fmt::format(
      R"({{"bench":"master-envelope","nodes":{},"value_bytes":{},"put_batch":128,"steps":[)",
      opts.nodes, kEnvelopeValueBytes);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    out << (i ? "," : "") << "\n  {";
    out << fmt::format(
        R"("objects":{},"fill_s":{:.3f},"bytes_per_object":{:.1f},"rss_bytes_per_object":{:.1f},)"
        R"("put_keys_per_s":{:.0f},"put_p50_us":{:.1f},"put_p99_us":{:.1f},"put_max_us":{:.1f},)"
        R"("lookup_keys_per_s":[)",
        s.objects, s.fill_s, s.bytes_per_object, s.rss_bytes_per_object,
        s.put_keys_per_s, s.put_p50_us, s.put_p99_us, s.put_max_us);
    for (size_t j = 0; j < s.lookups.size(); ++j) {
      out << (j ? "," : "")
          << fmt::format(R"({{"batch":{},"threads":{},"keys_per_s":{:.0f}}})",
                         s.lookups[j].batch, s.lookups[j].threads,
                         s.lookups[j].keys_per_s);
    }
    out << fmt::format(
        R"(],"lookup_untracked_keys_per_s":{:.0f},"lookup_tracked_keys_per_s":{:.0f},)"
        R"("heartbeat_us":{:.2f},"heartbeat_p99_us":{:.2f},"housekeep_ms":{:.3f},)"
        R"("evicted_objects":{},"evict_ms":{:.3f},"evict_ns_per_object":{:.1f},)"
        R"("node_objects":{},"node_death_ms":{:.3f},)"
        R"("restart_objects":{},"restart_s":{:.3f},)"
        R"("shard_holds":{{"fill":{},"lookup":{},"housekeep":{},"evict":{},)"
        R"("node_death":{},"restart":{}}}}})",
        s.lookup_untracked_keys_per_s, s.lookup_tracked_keys_per_s,
        s.heartbeat_us, s.heartbeat_p99_us, s.housekeep_ms, s.evicted_objects,
        s.evict_ms,
        s.evicted_objects ? s.evict_ms * 1e6 / double(s.evicted_objects) : 0.0,
        s.node_objects, s.node_death_ms, s.restart_objects, s.restart_s,
        HoldJson(s.hold_fill), HoldJson(s.hold_lookup),
        HoldJson(s.hold_housekeep), HoldJson(s.hold_evict),
        HoldJson(s.hold_node_death), HoldJson(s.hold_restart));
  }
  out << "\n]}\n";
  return bool(out);
}

bool WriteEnvelopeSvgs(const std::string& prefix,
                       const std::vector<EnvelopeStep>& steps) {
  auto series = [&](const std::string& name, auto get) {
    LineSeries s{name, {}};
    for (const auto& st : steps)
      s.points.emplace_back(Millions(st.objects), get(st));
    return s;
  };
  const std::string x = "objects (millions)";
  bool ok = WriteFile(
      prefix + "-memory.svg",
      LineChartSvg(
          "master memory per object", x, "bytes/object",
          {series("heap in use",
                  [](const EnvelopeStep& s) { return s.bytes_per_object; }),
           series("RSS growth", [](const EnvelopeStep& s) {
             return s.rss_bytes_per_object;
           })}));
  std::vector<LineSeries> lk;
  if (!steps.empty()) {
    for (const auto& l : steps[0].lookups) {
      lk.push_back(series(fmt::format("batch {}, {} thr", l.batch, l.threads),
                          [b = l.batch, t = l.threads](const EnvelopeStep& s) {
                            return RateOf(s, b, t) / 1e3;
                          }));
    }
  }
  ok = WriteFile(prefix + "-lookups.svg",
                 LineChartSvg("read-only lookups (QueryReadOnlyBatch)", x,
                              "thousand keys/s", lk)) &&
       ok;
  ok =
      WriteFile(
          prefix + "-latency.svg",
          LineChartSvg(
              "cost of one operation", x, "ms",
              {series("put batch of 128, p99",
                      [](const EnvelopeStep& s) { return s.put_p99_us / 1e3; }),
               series("housekeeping round",
                      [](const EnvelopeStep& s) { return s.housekeep_ms; }),
               series("eviction of 1%",
                      [](const EnvelopeStep& s) { return s.evict_ms; }),
               series("node death (1/4 of objects)",
                      [](const EnvelopeStep& s) { return s.node_death_ms; }),
               series("restart (re-registration)",
                      [](const EnvelopeStep& s) {
                        return s.restart_s * 1e3;
                      })})) &&
      ok;
  ok =
      WriteFile(
          prefix + "-holds.svg",
          LineChartSvg(
              "longest shard-lock hold", x, "ms",
              {series("fill",
                      [](const EnvelopeStep& s) { return s.hold_fill.max_ms; }),
               series(
                   "lookups",
                   [](const EnvelopeStep& s) { return s.hold_lookup.max_ms; }),
               series("housekeeping",
                      [](const EnvelopeStep& s) {
                        return s.hold_housekeep.max_ms;
                      }),
               series(
                   "eviction",
                   [](const EnvelopeStep& s) { return s.hold_evict.max_ms; }),
               series("node death",
                      [](const EnvelopeStep& s) {
                        return s.hold_node_death.max_ms;
                      }),
               series("restart",
                      [](const EnvelopeStep& s) {
                        return s.hold_restart.max_ms;
                      })})) &&
      ok;
  return ok;
}

}  // namespace kvpool::bench
