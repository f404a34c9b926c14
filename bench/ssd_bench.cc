// kvpool bench ssd: random reads of whole objects from FileStorage, `depth`
// objects per BatchRead, one batch after the other, into 4096-aligned
// buffers (the zero-copy path). The baseline is fio with the io_uring engine
// and O_DIRECT doing random reads of the same block size from the very
// segment files that hold the objects, in the same batch rhythm (submit
// `depth`, wait for all of them): same device, same extents, same cache
// state, so the ratio shows what the record format, the checksum and the
// index cost over the raw device.
#include "bench/ssd_bench.h"

#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "benchutil/bench_util.h"
#include "common/size_parse.h"
#include "storage/aligned_buffer.h"
#include "storage/file_storage.h"

namespace kvpool {

namespace {

using bench::NowSec;
using bench::Percentile;
using storage::AlignedBuffer;

// Throughput of one run and the latency percentiles of its unit of work
// (a batch for FileStorage, one I/O for fio).
struct Measured {
  double mbps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double mean_ms = 0;  // fio only: its total latency's mean
};

struct Row {
  uint64_t size = 0;
  int depth = 0;
  Measured fs;
  Measured fio;
  // Median over rounds of FileStorage/fio measured back to back: the disk's
  // speed drifts by 2x between seconds, so a ratio of two medians taken
  // at different moments says more about the drift than about the code.
  double ratio = 0;
  double ratio_min = 0;
  double ratio_max = 0;
};

// Single-quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

double Number(const google::protobuf::Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? 0 : it->second.number_value();
}

const google::protobuf::Struct* Child(const google::protobuf::Struct& s,
                                      const std::string& name) {
  auto it = s.fields().find(name);
  if (it == s.fields().end() || !it->second.has_struct_value()) return nullptr;
  return &it->second.struct_value();
}

Result<Measured> RunFio(const SsdBenchOptions& opts,
                        const std::vector<std::string>& files, uint64_t size,
                        int depth) {
  // fio takes at most 4096 characters per option: files of one directory
  // are named relative to it (--directory), which fits hundreds of them.
  std::string dir =
      files.empty() ? std::string()
                    : std::filesystem::path(files[0]).parent_path().string();
  for (const std::string& f : files) {
    if (std::filesystem::path(f).parent_path().string() != dir) dir.clear();
  }
  // fio separates file names with ':'. Past the limit, the files named so
  // far stand for the rest (the same disk, files of the same kind).
  std::string names;
  for (const std::string& path : files) {
    const std::string f =
        dir.empty() ? path : std::filesystem::path(path).filename().string();
    std::string escaped;
    for (char c : f) {
      if (c == ':') escaped += '\\';
      escaped += c;
    }
    if (!names.empty() && names.size() + 1 + escaped.size() > 4000) break;
    if (!names.empty()) names += ':';
    names += escaped;
  }
  // --readonly: fio must never write into the store's files.
  const std::string err_file = opts.dir + "/fio.stderr";
  // glibc then advises fio's I/O buffers MADV_HUGEPAGE, as FileStorage's
  // destinations are.
  const std::string cmd = fmt::format(
      "{}{} --name=kvpool-ssd-bench{} --filename={} --readonly --rw=randread "
      "--bs={} --ioengine=io_uring --direct=1 --iodepth={} "
      "--iodepth_batch_submit={} --iodepth_batch_complete_min={} "
      "--runtime={} --time_based --lat_percentiles=1 --output-format=json "
      "2>{}",
      opts.huge_page_dest ? "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 " : "",
      ShellQuote(opts.fio_path),
      dir.empty() ? std::string() : " --directory=" + ShellQuote(dir),
      ShellQuote(names), size, depth, depth, depth,
      std::max(1, int(opts.seconds_per_case + 0.5)), ShellQuote(err_file));
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    return Status(ErrorCode::INTERNAL_ERROR, "popen: " + cmd);
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int rc = ::pclose(p);
  // fio may print notes before its JSON document.
  const size_t start = text.find('{');
  if (rc != 0 || start == std::string::npos) {
    std::ifstream err(err_file);
    std::string why((std::istreambuf_iterator<char>(err)),
                    std::istreambuf_iterator<char>());
    return Status(ErrorCode::INTERNAL_ERROR,
                  fmt::format("fio failed (exit {}; is it installed?): {} {}",
                              rc, why.substr(0, 500), text.substr(0, 500)));
  }
  google::protobuf::Struct doc;
  auto st =
      google::protobuf::util::JsonStringToMessage(text.substr(start), &doc);
  if (!st.ok()) {
    return Status(ErrorCode::INTERNAL_ERROR,
                  "cannot parse fio's JSON: " + st.ToString());
  }
  auto jobs = doc.fields().find("jobs");
  if (jobs == doc.fields().end() ||
      jobs->second.list_value().values_size() == 0) {
    return Status(ErrorCode::INTERNAL_ERROR, "fio's JSON has no jobs");
  }
  const auto* read =
      Child(jobs->second.list_value().values(0).struct_value(), "read");
  if (read == nullptr)
    return Status(ErrorCode::INTERNAL_ERROR, "no read stats");
  Measured r;
  r.mbps = Number(*read, "bw_bytes") / 1e6;
  // Total latency (submission to completion) when fio was asked for its
  // percentiles, else completion latency.
  const auto* lat = Child(*read, "lat_ns");
  if (lat != nullptr) r.mean_ms = Number(*lat, "mean") / 1e6;
  const google::protobuf::Struct* pct =
      lat ? Child(*lat, "percentile") : nullptr;
  if (pct == nullptr) {
    const auto* clat = Child(*read, "clat_ns");
    pct = clat ? Child(*clat, "percentile") : nullptr;
  }
  if (pct != nullptr) {
    r.p50_ms = Number(*pct, "50.000000") / 1e6;
    r.p99_ms = Number(*pct, "99.000000") / 1e6;
  }
  return r;
}

}  // namespace

Result<FioRandRead> RunFioRandRead(const std::string& fio_path,
                                   const std::vector<std::string>& files,
                                   uint64_t block, int depth, double seconds,
                                   const std::string& scratch_dir) {
  SsdBenchOptions o;
  o.fio_path = fio_path;
  o.dir = scratch_dir;
  o.seconds_per_case = seconds;
  auto m = RunFio(o, files, block, depth);
  if (!m.ok()) return m.status();
  return FioRandRead{m->mbps, m->mean_ms};
}

namespace {

std::string Key(uint64_t size, uint64_t i) {
  return fmt::format("o{}-{}", size, i);
}

// First bytes of object i, to spot-check what was read.
uint64_t Tag(uint64_t size, uint64_t i) { return size * 1000003 + i; }

// Destination buffers of the reads, in one region. With huge pages the
// region is physically contiguous in 2 MiB runs, so an O_DIRECT read of a
// value needs few DMA segments (virtio-blk takes at most 254 per request; a
// 1 MiB read into 4 KiB pages needs 256 and is split in two).
class DestArena {
 public:
  DestArena(uint64_t bytes, bool huge) : size_(bytes) {
    constexpr uint64_t kHuge = 2ull << 20;
    size_ = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = nullptr;
    if (::posix_memalign(&p, kHuge, size_) != 0) throw std::bad_alloc();
    data_ = static_cast<uint8_t*>(p);
    if (huge) ::madvise(data_, size_, MADV_HUGEPAGE);
    std::memset(data_, 0, size_);  // fault in now, not during the first run
  }
  ~DestArena() { std::free(data_); }
  DestArena(const DestArena&) = delete;
  DestArena& operator=(const DestArena&) = delete;
  uint8_t* data() const { return data_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_;
};

// The run with the median throughput: a shared virtual disk has bursts
// (host caches) that a best-of would reward.
Measured MedianRun(std::vector<Measured> runs) {
  std::sort(runs.begin(), runs.end(), [](const Measured& a, const Measured& b) {
    return a.mbps < b.mbps;
  });
  return runs[runs.size() / 2];
}

// Random reads of `depth` objects per BatchRead for `seconds`, each checked
// by the tag at its start.
Result<Measured> ReadFromStorage(FileStorage& fs, uint64_t size, uint64_t count,
                                 int depth, double seconds,
                                 const std::vector<uint8_t*>& dest,
                                 std::mt19937_64& rng) {
  std::vector<double> lat;
  uint64_t bytes = 0;
  const double start = NowSec();
  while (NowSec() - start < seconds || lat.size() < 5) {
    std::vector<ReadItem> items;
    std::vector<uint64_t> which;
    for (int j = 0; j < depth; ++j) {
      which.push_back(rng() % count);
      items.push_back({"bench", Key(size, which.back()), dest[j], size});
    }
    const double t = NowSec();
    auto res = fs.BatchRead(items);
    lat.push_back(NowSec() - t);
    for (int j = 0; j < depth; ++j) {
      if (!res[j].ok()) return res[j].status();
      uint64_t tag = 0;
      std::memcpy(&tag, dest[j], sizeof(tag));
      if (*res[j] != size || tag != Tag(size, which[j])) {
        return Status(ErrorCode::INTERNAL_ERROR,
                      "wrong bytes read for " + items[j].key);
      }
    }
    bytes += size * uint64_t(depth);
  }
  Measured m;
  m.mbps = double(bytes) / (NowSec() - start) / 1e6;
  m.p50_ms = Percentile(lat, 50) * 1e3;
  m.p99_ms = Percentile(lat, 99) * 1e3;
  return m;
}

int RunSsdBenchQuietly(const SsdBenchOptions& opts) {
  FileStorageConfig cfg;
  cfg.ssd_capacity_bytes = opts.dataset_bytes * 2;
  if (opts.io_backend == "pread") {
    cfg.ssd_io_backend = SsdIoBackend::kPread;
  } else if (opts.io_backend == "io_uring") {
    cfg.ssd_io_backend = SsdIoBackend::kIoUring;
  } else if (opts.io_backend != "auto") {
    std::fprintf(stderr, "error: io_backend must be auto, io_uring or pread\n");
    return 1;
  }
  int max_depth = 1;
  for (int d : opts.depths) max_depth = std::max(max_depth, d);
  cfg.ssd_io_queue_depth = unsigned(std::max(64, max_depth));
  std::error_code ec;
  std::filesystem::create_directories(opts.dir, ec);

  std::mt19937_64 rng(42);
  std::vector<Row> rows;
  bool io_uring = false;
  const int total = int(opts.object_sizes.size() * opts.depths.size());
  int case_no = 0;
  for (uint64_t size : opts.object_sizes) {
    // A store of its own per object size, so that fio reads exactly the
    // files that hold these objects.
    cfg.ssd_dir = fmt::format("{}/filestorage-{}", opts.dir, FormatSize(size));
    std::filesystem::remove_all(cfg.ssd_dir, ec);
    auto opened = FileStorage::Open(cfg);
    if (!opened.ok()) {
      std::fprintf(stderr, "error: %s\n", opened.status().ToString().c_str());
      return 1;
    }
    std::unique_ptr<FileStorage> fs = std::move(opened).value();
    io_uring = fs->io_uring_enabled();
    const uint64_t count = std::max<uint64_t>(opts.dataset_bytes / size, 1);
    std::fprintf(stderr, "writing %lu objects of %s to %s (%s) ...\n",
                 static_cast<unsigned long>(count), FormatSize(size).c_str(),
                 cfg.ssd_dir.c_str(), io_uring ? "io_uring" : "pread");
    {
      constexpr int kWriteBatch = 8;
      std::vector<AlignedBuffer> src;
      for (int j = 0; j < kWriteBatch; ++j) {
        src.emplace_back(size);
        for (uint64_t b = 0; b < size; ++b) {
          src[j].data()[b] = uint8_t(b * 131 + j);
        }
      }
      for (uint64_t i = 0; i < count; i += kWriteBatch) {
        std::vector<WriteItem> items;
        for (uint64_t j = i; j < std::min(count, i + kWriteBatch); ++j) {
          uint8_t* p = src[j - i].data();
          const uint64_t tag = Tag(size, j);
          std::memcpy(p, &tag, sizeof(tag));
          items.push_back({"bench", Key(size, j), p, size});
        }
        for (const Status& st : fs->BatchWrite(items)) {
          if (!st.ok()) {
            std::fprintf(stderr, "error: write: %s\n", st.ToString().c_str());
            return 1;
          }
        }
      }
    }
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(cfg.ssd_dir)) {
      files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    DestArena arena(size * uint64_t(max_depth), opts.huge_page_dest);
    std::vector<uint8_t*> dest;
    for (int j = 0; j < max_depth; ++j) dest.push_back(arena.data() + j * size);

    for (int depth : opts.depths) {
      ++case_no;
      Row row;
      row.size = size;
      row.depth = depth;
      std::vector<Measured> fs_runs, fio_runs;
      std::vector<double> ratios;
      for (int round = 1; round <= std::max(1, opts.rounds); ++round) {
        // Who goes first alternates, so neither side always meets the disk
        // just after the other has warmed (or tired) it.
        Measured fs_run, fio_run;
        for (int side = 0; side < 2; ++side) {
          const bool fs_side = (side == 0) == (round % 2 == 1);
          std::fprintf(stderr, "[%d/%d] %s qd%d round %d/%d: %s ...", case_no,
                       total, FormatSize(size).c_str(), depth, round,
                       std::max(1, opts.rounds),
                       fs_side ? "FileStorage" : "fio");
          auto run = fs_side ? ReadFromStorage(*fs, size, count, depth,
                                               opts.seconds_per_case, dest, rng)
                             : RunFio(opts, files, size, depth);
          if (!run.ok()) {
            std::fprintf(stderr, "\nerror: %s\n",
                         run.status().ToString().c_str());
            return 1;
          }
          std::fprintf(stderr, " %.0f MB/s\n", run->mbps);
          (fs_side ? fs_run : fio_run) = *run;
        }
        fs_runs.push_back(fs_run);
        fio_runs.push_back(fio_run);
        if (fio_run.mbps > 0) ratios.push_back(fs_run.mbps / fio_run.mbps);
      }
      std::sort(ratios.begin(), ratios.end());
      if (!ratios.empty()) {
        row.ratio = ratios[ratios.size() / 2];
        row.ratio_min = ratios.front();
        row.ratio_max = ratios.back();
      }
      row.fs = MedianRun(fs_runs);
      row.fio = MedianRun(fio_runs);
      rows.push_back(row);
    }
    fs.reset();
    if (!opts.keep_files) std::filesystem::remove_all(cfg.ssd_dir, ec);
  }
  std::filesystem::remove(opts.dir + "/fio.stderr", ec);

  std::printf(
      "\nkvpool bench ssd (%s, O_DIRECT random reads of whole objects, "
      "FileStorage on %s, reading into %s; ratio = median over %d round(s) "
      "of FileStorage/fio measured back to back, MB/s = median run; latency "
      "per batch for FileStorage, per I/O for fio)\n",
      opts.dir.c_str(), io_uring ? "io_uring" : "pread",
      opts.huge_page_dest ? "huge pages (both sides)"
                          : "4 KiB pages (both sides)",
      std::max(1, opts.rounds));
  std::printf("%-12s %16s %9s %7s %13s %9s %9s %9s %9s\n", "case",
              "FileStorage_MB/s", "fio_MB/s", "ratio", "ratio_range",
              "fs_p50ms", "fs_p99ms", "fio_p50", "fio_p99");
  for (const Row& r : rows) {
    const std::string name =
        fmt::format("{} qd{}", FormatSize(r.size), r.depth);
    const std::string range =
        fmt::format("{:.0f}-{:.0f}%", 100 * r.ratio_min, 100 * r.ratio_max);
    std::printf("%-12s %16.0f %9.0f %6.0f%% %13s %9.2f %9.2f %9.2f %9.2f\n",
                name.c_str(), r.fs.mbps, r.fio.mbps, 100 * r.ratio,
                range.c_str(), r.fs.p50_ms, r.fs.p99_ms, r.fio.p50_ms,
                r.fio.p99_ms);
  }
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? "," : "")
          << fmt::format(
                 R"({{"size":{},"depth":{},"filestorage_mbps":{:.1f},)"
                 R"("filestorage_p50_ms":{:.3f},"filestorage_p99_ms":{:.3f},)"
                 R"("fio_mbps":{:.1f},"fio_p50_ms":{:.3f},"fio_p99_ms":{:.3f},)"
                 R"("ratio":{:.3f},"io_uring":{},"huge_page_dest":{}}})",
                 r.size, r.depth, r.fs.mbps, r.fs.p50_ms, r.fs.p99_ms,
                 r.fio.mbps, r.fio.p50_ms, r.fio.p99_ms, r.ratio,
                 io_uring ? "true" : "false",
                 opts.huge_page_dest ? "true" : "false");
    }
    out << "]\n";
  }
  return 0;
}

}  // namespace

int RunSsdBench(const SsdBenchOptions& opts) {
  // The store's start-up lines would land in the middle of the table.
  const spdlog::level::level_enum log_level = spdlog::get_level();
  spdlog::set_level(spdlog::level::warn);
  const int rc = RunSsdBenchQuietly(opts);
  spdlog::set_level(log_level);
  return rc;
}

}  // namespace kvpool
