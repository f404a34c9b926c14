// The replay report's "Block reads" section in Markdown: per arm, what was
// found, read and from where, what ended a request's read prefix, and how
// long promotions waited for gets' disk reads. Used by report.cc.
#ifndef KVPOOL_REPLAY_REPORT_READS_H_
#define KVPOOL_REPLAY_REPORT_READS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "replay/arm.h"

namespace kvpool::replay {

std::string RenderBlockReadsMarkdown(const nlohmann::json& report);

// Where the arm's holders' promotion workers spent the measure, in seconds
// per phase of kPromotionPhases, summed over holders and workers.
nlohmann::json PromotionPhaseSeconds(const ArmResult& arm);
// The holders' SSD reads over the measure (gets and promotions alike):
// {"reads", "mean_ms" (submission to completion), "in_flight" (their summed
// time / the measure: Little's law)}; empty when no read was timed.
nlohmann::json DiskReadTiming(const ArmResult& arm);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_REPORT_READS_H_
