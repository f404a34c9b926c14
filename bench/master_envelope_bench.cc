// kvpool bench master-envelope: where one master stops. Grows the object
// count in steps and, at each, measures memory per object, read-only
// lookups at batch 1 and 128 from 1-8 threads, batched puts, heartbeats,
// housekeeping, an eviction pass, the death of a node holding a quarter of
// the objects, and a restart's re-registration, each with the longest
// shard-lock hold it caused (docs/master_envelope.md).
#include <spdlog/spdlog.h>

#include <cstdio>

#include "bench/bench_main.h"
#include "bench/envelope_measure.h"
#include "bench/envelope_report.h"
#include "common/malloc_tuning.h"

namespace kvpool {

int RunMasterEnvelopeBench(const BenchOptions& opts) {
  // As kvpool-master does (KVPOOL_MALLOC_FASTBINS=1 keeps glibc's default).
  const bool no_fastbins = ConfigureMallocForMaster();
  std::fprintf(stderr, "malloc fastbins: %s\n", no_fastbins ? "off" : "on");
  bench::EnvelopeOptions eo;
  eo.steps = opts.envelope_steps;
  eo.nodes = opts.envelope_nodes;
  eo.seconds = opts.seconds_per_case;
  eo.lookup_threads = opts.envelope_threads;
  eo.put_window = opts.envelope_put_window;
  std::vector<bench::EnvelopeStep> steps;
  // A restart remounts hundreds of segments, each with a warning; the
  // benchmark's progress is on stderr already.
  spdlog::set_level(spdlog::level::err);
  for (size_t i = 0; i < eo.steps.size(); ++i) {
    const uint64_t n = eo.steps[i];
    std::fprintf(stderr, "[step %zu/%zu] %lu objects\n", i + 1, eo.steps.size(),
                 n);
    bench::EnvelopeStep step;
    // One master at a time: the filled one goes before the restarted one
    // is built, so a step needs the memory of one master only.
    bench::RunStep(eo, n, &step);
    bench::RunRestart(eo, n, &step);
    steps.push_back(step);
    // What the run has so far, in case a later step does not fit.
    if (!opts.json_path.empty() &&
        !bench::WriteEnvelopeJson(opts.json_path, eo, steps)) {
      return 1;
    }
  }
  bench::PrintEnvelopeTable(eo, steps);
  if (!opts.svg_path.empty() &&
      !bench::WriteEnvelopeSvgs(opts.svg_path, steps)) {
    return 1;
  }
  return 0;
}

}  // namespace kvpool
