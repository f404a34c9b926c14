// kvpool-node: contributes a DRAM segment to the pool and serves it.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "common/absl_runtime.h"
#include "common/fd_limits.h"
#include "node/node.h"
#include "tools/flags.h"

int main(int argc, char** argv) {
  kvpool::ConfigureAbslRuntime();
  kvpool::NodeConfig c;
  CLI::App app{"kvpool-node: a holder of the kvpool KV-cache store"};
  app.set_config("--config", "",
                 "TOML/INI file with the same keys as the flags");
  app.add_option("--master_server_address", c.master_server_address,
                 "HOST:PORT of kvpool-master")
      ->capture_default_str();
  kvpool::AddSizeFlag(app, "--global_segment_size", &c.global_segment_size,
                      "DRAM this node contributes");
  app.add_option("--segment_dir", c.segment_dir,
                 "memory file system for the segment files (/dev/shm; a "
                 "tmpfs mounted huge=always or hugetlbfs for 2 MiB pages)")
      ->capture_default_str();
  app.add_option("--local_hostname", c.local_hostname,
                 "address other hosts use to reach us")
      ->capture_default_str();
  app.add_option("--data_port", c.data_port, "TCP data-plane port; 0 = any")
      ->capture_default_str();
  app.add_option("--data_bind_address", c.data_bind_address,
                 "address the data plane binds")
      ->capture_default_str();
  app.add_option("--metrics_port", c.metrics_port,
                 "HTTP /metrics and /status; 0 = any, -1 = off")
      ->capture_default_str();
  app.add_option("--node_id", c.node_id, "unique name; generated when empty");
  AddMasterSecurityFlags(app, &c);
  app.add_option("--dram_directory", c.dram_directory,
                 "keep a directory of this node's DRAM replicas and "
                 "re-register it after a master restart (true/false)")
      ->capture_default_str();
  app.add_option("--segment_prefault", c.segment_prefault,
                 "zero and map the segments' pages in the background from "
                 "start, so no put pays a page's first touch (true/false)")
      ->capture_default_str();
  app.add_option("--segment_huge_pages", c.segment_huge_pages,
                 "where segment_dir has 4 KiB pages, mount a huge=within_size "
                 "tmpfs under it for the segments (needs CAP_SYS_ADMIN; "
                 "else a warning and segment_dir as is) (true/false)")
      ->capture_default_str();
  app.add_option("--heartbeat_interval_ms", c.heartbeat_interval_ms,
                 "heartbeat period")
      ->capture_default_str();
  app.add_option("--data_threads", c.data_threads, "data-plane I/O threads")
      ->capture_default_str();
  app.add_option("--rpc_timeout_ms", c.rpc_timeout_ms,
                 "deadline of each call to the master, ms")
      ->capture_default_str();
  app.add_flag("--enable_ssd_offload", c.enable_ssd_offload,
               "give this node an SSD tier");
  app.add_option("--ssd_offload_path", c.ssd_offload_path,
                 "directory of the SSD tier");
  kvpool::AddSizeFlag(app, "--ssd_capacity_bytes", &c.ssd_capacity_bytes,
                      "bytes of SSD the tier may use");
  kvpool::AddSizeFlag(app, "--ssd_segment_file_size", &c.ssd_segment_file_size,
                      "size of each log file");
  app.add_option("--ssd_gc_interval_ms", c.ssd_gc_interval_ms,
                 "garbage collection period")
      ->capture_default_str();
  app.add_option("--ssd_eviction_interval_ms", c.ssd_eviction_interval_ms,
                 "SSD watermark check period")
      ->capture_default_str();
  app.add_option("--ssd_io_backend", c.ssd_io_backend,
                 "auto, io_uring or pread")
      ->capture_default_str();
  app.add_option("--ssd_verify_threads", c.ssd_verify_threads,
                 "threads that verify the checksums of multi-value SSD reads "
                 "while later values arrive (0 = the reading thread alone)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--capability_clock_skew_ms", c.capability_clock_skew_ms,
                 "grace (ms) past a data-plane capability's expiry: the bound "
                 "on how far this host's clock may lag the master's")
      ->check(CLI::Range(int64_t{0}, int64_t{60000}))
      ->capture_default_str();
  app.add_option("--data_max_connections", c.data_max_connections,
                 "TCP data-plane connections at once; at the limit the "
                 "longest idle one makes room (0 = open-file limit - 256)")
      ->capture_default_str();
  app.add_option("--data_idle_timeout_ms", c.data_idle_timeout_ms,
                 "close a data-plane connection idle this long (0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  kvpool::AddSizeFlag(app, "--data_max_buffered_bytes",
                      &c.data_max_buffered_bytes,
                      "bytes all data-plane requests in flight may hold");
  app.add_option("--data_tls_cert_file", c.data_tls_cert_file,
                 "PEM certificate chain of the TCP data server; with "
                 "--data_tls_key_file it serves TLS only (default plaintext)");
  app.add_option("--data_tls_key_file", c.data_tls_key_file,
                 "PEM private key of --data_tls_cert_file");
  app.add_option("--data_tls_ca_file", c.data_tls_ca_file,
                 "PEM CA that verifies other nodes' data servers (promotion "
                 "writes); set when they serve TLS");
  kvpool::AddSizeFlag(app, "--prefetch_buffer_segment",
                      &c.prefetch_buffer_segment,
                      "bytes of the PREFETCH_BUFFER segment for router "
                      "promotions (0 = none)");
  app.add_option("--promotion_pull", c.promotion_pull,
                 "run the promotion pull thread (else promotions ride the "
                 "heartbeat)")
      ->capture_default_str();
  app.add_option("--promotion_pull_interval_ms", c.promotion_pull_interval_ms,
                 "pull thread period")
      ->capture_default_str();
  app.add_option("--promotion_max_per_pull", c.promotion_max_per_pull,
                 "tasks taken per pull")
      ->capture_default_str();
  app.add_option("--promotion_read_batch", c.promotion_read_batch,
                 "SSD reads per promotion worker submission (1 = sequential)")
      ->capture_default_str();
  kvpool::AddSizeFlag(app, "--promotion_inflight_bytes",
                      &c.promotion_inflight_bytes,
                      "pipelined promotion executor: bytes in flight at most "
                      "(0 = the RFC's single sequential worker)");
  kvpool::AddSizeFlag(app, "--promotion_staging_bytes",
                      &c.promotion_staging_bytes,
                      "huge-page staging memory for promotion reads (0 = read "
                      "straight into the replica)");
  kvpool::AddSizeFlag(app, "--ssd_read_share_bytes", &c.ssd_read_share_bytes,
                      "bytes a get's SSD read may keep for a queued promotion "
                      "of the same key (0 = off: promotions read the disk)");
  app.add_option("--promotion_yield_to_gets_ms", c.promotion_yield_to_gets_ms,
                 "while a get reads the SSD, a promotion waits up to this "
                 "long before submitting its reads (0 = off)")
      ->capture_default_str();
  app.add_option("--promotion_skip_after_get_ms", c.promotion_skip_after_get_ms,
                 "drop a prefetch promotion whose block a get read from this "
                 "disk within this many ms (0 = off: read it again)")
      ->capture_default_str();
  app.add_option("--prefetch_profile", c.prefetch_profile,
                 "default: the holder knobs as set; rfc: the seeds' holder "
                 "(no shared reads, no skip after a get, one sequential "
                 "worker), whatever they say")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "rfc"}));
  app.add_option("--promotion_drop_unreachable", c.promotion_drop_unreachable,
                 "drop a promotion task unread (as expired) when the batch "
                 "taken now could not land before its deadline")
      ->capture_default_str();
  app.add_option("--promotion_workers", c.promotion_workers,
                 "pipelined promotion executor: worker threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  kvpool::EtcdFlags etcd_flags;
  kvpool::AddEtcdFlags(app, &etcd_flags);
  CLI11_PARSE(app, argc, argv);
  // Connections are descriptors: a flood meets the hard limit, not a
  // default soft limit of 1024 (docs/security.md).
  kvpool::RaiseOpenFileLimit();
  c.master_server_address =
      kvpool::MasterAddress(etcd_flags, c.master_server_address);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  kvpool::Node node(c);
  if (auto s = node.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  std::printf("kvpool-node %s data_endpoint=%s metrics_port=%d\n",
              node.node_id().c_str(), node.data_endpoint().c_str(),
              node.metrics_port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("signal {}: stopping", sig);
  node.Stop();
  return 0;
}
