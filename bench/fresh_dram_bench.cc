// Whether a put into a node's never-touched DRAM costs more than a put into
// DRAM written before (issue #42, item 2), and a separate process's first
// read against its repeated read (issue #44).
//
// The node is a LocalCluster node in this process; the client is a second
// process (forked before either starts a thread), so it maps the segment
// itself over shared memory, as an engine does, or goes over TCP. Each
// sample is a fresh cluster, so "never touched" really is: the segment's
// offset allocator hands out the segment from its start, and after the
// first round's values are removed the second round lands on the same
// (now written) bytes.
//
// Rows, per node setting (page size: NodeConfig::segment_huge_pages;
// population: segment_prefault) and transport: median per-put (per-get)
// time over a round, then median and spread (min-max) of that over
// --repeats clusters; and the reader's page-table growth (VmPTE).
//
//   fresh_dram_bench [--repeats=3] [--segment_mib=256] [--round_mib=64]
//                    [--startup_gib=0] [--configs=4k,huge,huge-nopf]
// --startup_gib=N adds the start-up of a node with an N GiB segment (mount,
// then a first put and get by another process, and that process's page
// tables for the whole segment); --repeats=0 measures only that.
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "node/node.h"
#include "transport/shm_segment.h"

namespace kvpool {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What the client process does for one sample; the parent sends it over a
// pipe as one line, and the answer comes back as one line of numbers.
struct Job {
  // p: puts (never touched, then written before); g: gets, twice; c: gets
  // by a first client, then by a second client of the same process; s:
  // start-up (a put and a get over shm, a get over TCP); m: the page
  // tables of the whole segment at `path`, of `count` bytes, mapped.
  char op = 'p';
  TransportMode transport = TransportMode::kShm;
  uint64_t size = 1 << 20;
  uint64_t count = 64;
  char master[64] = {};
  char path[160] = {};
};

// Per-op median (ms) of the round, twice: first round, second round; the
// process's page-table growth over the job (KiB). Start-up: first = put,
// second = shm get, third = TCP get (ms). Map: pte_kib of the whole
// segment mapped, map_ms the time that took.
struct Answer {
  double first = 0;
  double second = 0;
  double third = 0;
  double map_ms = 0;
  long pte_kib = 0;
  bool ok = false;
};

long VmPteKib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmPTE:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double TimeRound(Client& c, const std::vector<std::string>& keys, bool put,
                 const std::string& value, std::vector<char>* buf) {
  std::vector<double> ms;
  for (const auto& k : keys) {
    const auto t0 = Clock::now();
    bool ok = true;
    if (put) {
      ok = c.Put(k, value).ok();
    } else {
      ok = c.GetInto(k, buf->data(), buf->size()).ok();
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!ok) return -1;
  }
  return Median(ms);
}

// A node that has just started: another process's first put and get (the
// node's start-up is timed by the parent around this), and what mapping
// the whole segment costs that process (option (c) of #44).
Answer StartupJob(const Job& job) {
  Answer a;
  ClientConfig cc;
  cc.master_server_address = job.master;
  cc.transport = TransportMode::kShm;
  auto shm = Client::Create(cc);
  cc.transport = TransportMode::kTcp;
  auto tcp = Client::Create(cc);
  if (!shm.ok() || !tcp.ok()) return a;
  std::string value(job.size, 'v');
  std::vector<char> buf(job.size, 1);
  auto t = Clock::now();
  if (!shm.value()->Put("startup", value).ok()) return a;
  a.first = MsSince(t);
  t = Clock::now();
  if (!shm.value()->GetInto("startup", buf.data(), buf.size()).ok()) return a;
  a.second = MsSince(t);
  t = Clock::now();
  if (!tcp.value()->GetInto("startup", buf.data(), buf.size()).ok()) return a;
  a.third = MsSince(t);
  a.ok = true;
  return a;
}

// The whole segment mapped up front (MADV_POPULATE_READ, as MAP_POPULATE):
// its time and page tables.
Answer MapJob(const Job& job) {
  Answer a;
  const long pte0 = VmPteKib();
  auto view = ShmSegment::Open(job.path, job.count);
  if (!view.ok()) return a;
  const auto t = Clock::now();
  ::madvise(view.value()->data(), job.count, MADV_POPULATE_READ);
  a.map_ms = MsSince(t);
  a.pte_kib = VmPteKib() - pte0;
  a.ok = true;
  return a;
}

Answer RunJob(const Job& job) {
  if (job.op == 's') return StartupJob(job);
  if (job.op == 'm') return MapJob(job);
  Answer a;
  const long pte0 = VmPteKib();
  ClientConfig cc;
  cc.master_server_address = job.master;
  cc.transport = job.transport;
  auto client = Client::Create(cc);
  if (!client.ok()) return a;
  Client& c = *client.value();
  std::string value(job.size, 'v');
  // Touched before the clock starts: only the store's pages are measured.
  std::vector<char> buf(job.size, 1);
  std::vector<std::string> keys;
  for (uint64_t i = 0; i < job.count; ++i)
    keys.push_back("k" + std::to_string(i));
  if (job.op == 'p') {
    a.first = TimeRound(c, keys, true, value, nullptr);
    for (const auto& k : keys) c.Remove(k).IgnoreError();
    for (auto& k : keys) k += "b";
    a.second = TimeRound(c, keys, true, value, nullptr);
  } else if (job.op == 'g') {
    a.first = TimeRound(c, keys, false, value, &buf);
    a.second = TimeRound(c, keys, false, value, &buf);
  } else {
    // A second client of this process (another engine in it) reads what
    // the first read: before views were shared per process it set up its
    // own page tables again.
    a.first = TimeRound(c, keys, false, value, &buf);
    auto other = Client::Create(cc);
    if (!other.ok()) return a;
    a.second = TimeRound(*other.value(), keys, false, value, &buf);
  }
  a.pte_kib = VmPteKib() - pte0;
  a.ok = a.first >= 0 && a.second >= 0;
  return a;
}

[[noreturn]] void ClientProcess(int in, int out) {
  Job job;
  while (::read(in, &job, sizeof job) == sizeof job) {
    Answer a = RunJob(job);
    if (::write(out, &a, sizeof a) != sizeof a) break;
  }
  _exit(0);
}

struct Row {
  std::string name;
  std::vector<double> first, second, pte;
};

std::string Cell(const std::vector<double>& v, const char* fmt) {
  char s[96];
  const std::string f = std::string(fmt) + " (" + fmt + "-" + fmt + ")";
  std::snprintf(s, sizeof s, f.c_str(), Median(v),
                *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  return s;
}

void Print(const std::vector<Row>& rows, const char* first_name,
           const char* second_name) {
  std::printf(
      "| row | %s p50 ms (min-max) | %s p50 ms (min-max) | ratio | "
      "reader VmPTE +KiB |\n",
      first_name, second_name);
  std::printf("|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    std::printf("| %s | %s | %s | %.2f | %s |\n", r.name.c_str(),
                Cell(r.first, "%.3f").c_str(), Cell(r.second, "%.3f").c_str(),
                Median(r.first) / Median(r.second),
                Cell(r.pte, "%.0f").c_str());
  }
}

// A node setting the rows compare.
struct Config {
  const char* name;
  bool huge;
  bool prefault;
};
constexpr Config kConfigs[] = {{"4k", false, true},
                               {"huge", true, true},
                               {"4k-nopf", false, false},
                               {"huge-nopf", true, false}};

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Start-up of a node with a large segment: time to mounted (Start
// returned); another process's first put and gets (shm, TCP) and when they
// were done since the start; that process's page tables for the whole
// segment; when population ended.
bool Startup(uint64_t gib, const std::vector<Config>& configs, int to_child,
             int from_child) {
  std::printf(
      "\n| %llu GiB segment | pages | mounted s | first put ms | first get "
      "shm ms | first get tcp ms | put+gets done s | populated s | reader "
      "VmPTE whole segment KiB | mapping it ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n",
      static_cast<unsigned long long>(gib));
  for (const Config& cfg : configs) {
    LocalClusterOptions o;
    o.num_nodes = 1;
    o.segment_size = gib << 30;
    o.segment_prefault = cfg.prefault;
    o.segment_huge_pages = cfg.huge;
    LocalCluster cluster(o);
    const auto t0 = Clock::now();
    if (!cluster.Start().ok()) return false;
    const double mounted = Since(t0);
    Job job;
    job.count = o.segment_size;
    std::snprintf(job.master, sizeof job.master, "%s",
                  cluster.master_address().c_str());
    std::snprintf(job.path, sizeof job.path, "%s",
                  cluster.node(0).segment()->path().c_str());
    auto ask = [&](char op, Answer* a) {
      job.op = op;
      return ::write(to_child, &job, sizeof job) == sizeof job &&
             ::read(from_child, a, sizeof *a) == sizeof *a && a->ok;
    };
    Answer a, m;
    if (!ask('s', &a)) return false;
    const double served = Since(t0);
    const SegmentPopulator* pop = cluster.node(0).populator();
    const bool done = pop && pop->WaitDone(600000);
    const double populated = Since(t0);
    // After population: the reader's own cost, not the zeroing.
    if (!ask('m', &m)) return false;
    std::printf(
        "| %s | %s | %.3f | %.2f | %.2f | %.2f | %.3f | %s | %ld (%ld/GiB) | "
        "%.1f |\n",
        cfg.name, cluster.node(0).segment_files()->huge() ? "2 MiB" : "4 KiB",
        mounted, a.first, a.second, a.third, served,
        done ? std::to_string(populated).c_str() : "-", m.pte_kib,
        m.pte_kib / static_cast<long>(gib), m.map_ms);
    std::fflush(stdout);
  }
  return true;
}

std::vector<Config> ParseConfigs(const std::string& list) {
  std::vector<Config> out;
  for (const Config& c : kConfigs) {
    const std::string n = c.name;
    if (("," + list + ",").find("," + n + ",") != std::string::npos)
      out.push_back(c);
  }
  return out;
}

int Main(int argc, char** argv) {
  int repeats = 3;
  uint64_t segment_mib = 256, round_mib = 64, startup_gib = 0;
  std::string config_list = "4k,huge";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = val("--repeats=")) repeats = std::atoi(v);
    if (const char* v = val("--segment_mib=")) segment_mib = std::atoll(v);
    if (const char* v = val("--round_mib=")) round_mib = std::atoll(v);
    if (const char* v = val("--startup_gib=")) startup_gib = std::atoll(v);
    if (const char* v = val("--configs=")) config_list = v;
  }
  const std::vector<Config> configs = ParseConfigs(config_list);
  int to_child[2], from_child[2];
  if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return 1;
  // Before any thread: the child starts its own gRPC from scratch.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    ClientProcess(to_child[0], from_child[1]);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  spdlog::set_level(spdlog::level::warn);

  // By (op, setting, transport, size): the order the tables print in.
  std::map<std::tuple<char, int, int, int>, Row> rows;
  const struct {
    const char* name;
    TransportMode mode;
  } transports[] = {{"shm", TransportMode::kShm}, {"tcp", TransportMode::kTcp}};
  const uint64_t sizes[] = {64ull << 10, 1ull << 20, 4ull << 20};
  // Settings interleaved sample by sample: each is measured under the same
  // (changing) load as the others, its baseline included.
  for (int ti = 0; ti < 2 && repeats > 0; ++ti) {
    const auto& t = transports[ti];
    for (int si = 0; si < 3; ++si) {
      const uint64_t size = sizes[si];
      for (char op : {'p', 'g', 'c'}) {
        if (op == 'c' && (t.mode != TransportMode::kShm || size != 1 << 20))
          continue;
        for (int r = 0; r < repeats; ++r) {
          for (int ci = 0; ci < static_cast<int>(configs.size()); ++ci) {
            const Config& cfg = configs[ci];
            Row& row = rows[{op, ci, ti, si}];
            row.name = std::string(op == 'p' ? "put " : "get ") +
                       std::to_string(size >> 10) + " KiB, " + t.name + ", " +
                       cfg.name;
            LocalClusterOptions o;
            o.num_nodes = 1;
            o.segment_size = segment_mib << 20;
            o.segment_prefault = cfg.prefault;
            o.segment_huge_pages = cfg.huge;
            LocalCluster cluster(o);
            if (!cluster.Start().ok()) return 1;
            if (r == 0 && cluster.node(0).segment_files()->huge() != cfg.huge)
              std::fprintf(stderr, "%s: segment pages not as asked\n",
                           cfg.name);
            // The steady state: puts after the node's population ended.
            const SegmentPopulator* pop = cluster.node(0).populator();
            if (cfg.prefault && (!pop || !pop->WaitDone(60000))) return 1;
            Job job;
            job.op = op;
            job.transport = t.mode;
            job.size = size;
            job.count = (round_mib << 20) / size;
            std::snprintf(job.master, sizeof job.master, "%s",
                          cluster.master_address().c_str());
            if (op != 'p') {
              // The values are written by this process (the node's own
              // mapping); the client process reads them twice.
              auto c = cluster.NewClient();
              if (!c.ok()) return 1;
              std::string value(size, 'v');
              for (uint64_t i = 0; i < job.count; ++i) {
                if (!c.value()->Put("k" + std::to_string(i), value).ok())
                  return 1;
              }
            }
            Answer a;
            if (::write(to_child[1], &job, sizeof job) != sizeof job ||
                ::read(from_child[0], &a, sizeof a) != sizeof a || !a.ok) {
              std::fprintf(stderr, "client process failed\n");
              return 1;
            }
            row.first.push_back(a.first);
            row.second.push_back(a.second);
            row.pte.push_back(static_cast<double>(a.pte_kib));
          }
        }
      }
    }
  }
  std::vector<Row> puts, gets, clients;
  for (auto& [k, row] : rows) {
    (std::get<0>(k) == 'p'   ? puts
     : std::get<0>(k) == 'g' ? gets
                             : clients)
        .push_back(std::move(row));
  }
  if (repeats > 0) {
    Print(puts, "never touched", "written before");
    std::printf("\n");
    Print(gets, "first read", "repeated read");
    std::printf("\n");
    Print(clients, "first client's first read", "second client's first read");
    std::fflush(stdout);
  }
  if (startup_gib > 0 &&
      !Startup(startup_gib, configs, to_child[1], from_child[0])) {
    std::fprintf(stderr, "start-up run failed\n");
    return 1;
  }
  ::close(to_child[1]);
  ::waitpid(pid, nullptr, 0);
  return 0;
}

}  // namespace
}  // namespace kvpool

int main(int argc, char** argv) { return kvpool::Main(argc, argv); }
