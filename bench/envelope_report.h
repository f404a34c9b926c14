// What `kvpool bench master-envelope` prints and writes: the table of every
// figure against the object count, the JSON a simulation reads (field names
// in docs/master_envelope.md), and the SVG plots.
#ifndef KVPOOL_BENCH_ENVELOPE_REPORT_H_
#define KVPOOL_BENCH_ENVELOPE_REPORT_H_

#include <string>
#include <vector>

#include "bench/envelope_measure.h"

namespace kvpool::bench {

void PrintEnvelopeTable(const EnvelopeOptions& opts,
                        const std::vector<EnvelopeStep>& steps);
// False (and why on stderr) when the file cannot be written.
bool WriteEnvelopeJson(const std::string& path, const EnvelopeOptions& opts,
                       const std::vector<EnvelopeStep>& steps);
// PREFIX-memory.svg, -lookups.svg, -latency.svg, -holds.svg.
bool WriteEnvelopeSvgs(const std::string& prefix,
                       const std::vector<EnvelopeStep>& steps);

}  // namespace kvpool::bench

#endif  // KVPOOL_BENCH_ENVELOPE_REPORT_H_
