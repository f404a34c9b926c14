// CPU time of this process, in total and per thread name, between two
// readings: how much of the machine a replay arm used, and where it went.
// Threads are told apart by the names kvpool gives them (SetThreadName);
// CPU of threads that ended between the readings is known only in the total.
#ifndef KVPOOL_REPLAY_CPU_USAGE_H_
#define KVPOOL_REPLAY_CPU_USAGE_H_

#include <map>
#include <string>
#include <vector>

namespace kvpool::replay {

struct CpuReading {
  double wall_s = 0;     // steady clock
  double process_s = 0;  // user + system, all threads (getrusage)
  // Per live thread: (tid, name) -> user + system seconds.
  std::map<std::pair<int, std::string>, double> threads;
  // Other processes read alongside (the store's, when it runs apart):
  // label -> user + system seconds, summed over the processes of a label.
  std::map<std::string, double> others;
  // The whole machine (/proc/stat's "cpu" line), in seconds over all
  // cores since boot: busy (user, nice, system, irq, softirq, steal) and in
  // all. Other work on the machine shows here and nowhere else.
  double machine_busy_s = 0, machine_total_s = 0;
};

// `others`: (label, pid) of processes to read with this one.
CpuReading ReadCpu(const std::vector<std::pair<std::string, int>>& others = {});

// The component a thread of this name belongs to: "engines: steps",
// "engines: KV loads", "engines: stores", "holders: promotion",
// "holders: offload+SSD", "data servers", "master", "gRPC (master+clients)",
// or "other".
std::string CpuComponentOf(const std::string& thread_name);

struct CpuUsage {
  double wall_s = 0;
  double process_s = 0;  // this process and the `others`
  int cores = 1;
  double capacity_s = 0;   // wall x cores
  double utilisation = 0;  // process / capacity
  // The machine's CPU over the same interval (/proc/stat): busy share of
  // all cores, and the share used by everything but this process and the
  // `others` (0 when /proc/stat could not be read).
  double machine_utilisation = 0;
  double outside_utilisation = 0;
  // Seconds by component; "ended threads" is the process total minus the
  // threads seen at the end.
  std::map<std::string, double> components;
};

CpuUsage CpuBetween(const CpuReading& a, const CpuReading& b);

}  // namespace kvpool::replay

#endif  // KVPOOL_REPLAY_CPU_USAGE_H_
