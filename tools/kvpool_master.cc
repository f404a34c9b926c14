// kvpool-master: the metadata server. See README.md and docs/configuration.md.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "common/absl_runtime.h"
#include "common/fd_limits.h"
#include "common/malloc_tuning.h"
#include "master/ha_master.h"
#include "master/master_server.h"
#include "tools/flags.h"

namespace {
kvpool::MasterServer* g_server = nullptr;
}

int main(int argc, char** argv) {
  kvpool::ConfigureAbslRuntime();
  kvpool::ConfigureMallocForMaster();
  kvpool::MasterConfig c;
  CLI::App app{"kvpool-master: metadata server of the kvpool KV-cache store"};
  app.set_config("--config", "",
                 "TOML/INI file with the same keys as the flags");
  app.add_option("--rpc_address", c.rpc_address,
                 "address to bind (0.0.0.0 for other hosts)")
      ->capture_default_str();
  app.add_option("--rpc_port", c.rpc_port, "gRPC port; 0 picks a free one")
      ->capture_default_str();
  app.add_option("--metrics_port", c.metrics_port,
                 "HTTP /metrics and /status; 0 = any, -1 = off")
      ->capture_default_str();
  app.add_option("--rpc_thread_num", c.rpc_thread_num, "gRPC polling threads")
      ->capture_default_str();
  app.add_option("--default_kv_lease_ttl", c.default_kv_lease_ttl,
                 "read lease granted by get/exist, ms")
      ->capture_default_str();
  app.add_option("--default_kv_soft_pin_ttl", c.default_kv_soft_pin_ttl,
                 "how long a soft pin lasts, ms; renewed by each get")
      ->capture_default_str();
  app.add_option("--allow_evict_soft_pinned_objects",
                 c.allow_evict_soft_pinned_objects,
                 "evict soft-pinned objects once nothing unpinned is left")
      ->capture_default_str();
  app.add_option("--eviction_high_watermark_ratio",
                 c.eviction_high_watermark_ratio,
                 "evict when MAIN DRAM use passes this share")
      ->capture_default_str();
  app.add_option("--eviction_ratio", c.eviction_ratio,
                 "share of capacity freed per pass")
      ->capture_default_str();
  app.add_option("--put_start_discard_timeout_sec",
                 c.put_start_discard_timeout_sec,
                 "an unfinished put older than this may be replaced by a new "
                 "put of the key")
      ->capture_default_str();
  app.add_option("--put_start_release_timeout_sec",
                 c.put_start_release_timeout_sec,
                 "an unfinished put's memory is reclaimed after this")
      ->capture_default_str();
  app.add_option("--client_ttl", c.client_ttl,
                 "seconds of heartbeat silence before a node is dead")
      ->capture_default_str();
  app.add_option("--allocation_strategy", c.allocation_strategy,
                 "free_ratio_first or random")
      ->capture_default_str();
  app.add_option("--housekeeping_interval_ms", c.housekeeping_interval_ms,
                 "period of the housekeeping pass (leases, timeouts, eviction)")
      ->capture_default_str();
  app.add_flag("--enable_offload", c.enable_offload,
               "copy DRAM values to holders' SSDs");
  app.add_flag("--offload_on_evict", c.offload_on_evict,
               "offload at eviction instead of at PutEnd");
  app.add_flag("--offload_force_evict", c.offload_force_evict,
               "let eviction drop keys that have no SSD copy (counted)");
  app.add_option("--offloading_queue_limit", c.offloading_queue_limit,
                 "offload tasks in flight at most")
      ->capture_default_str();
  app.add_option("--offload_task_ttl_sec", c.offload_task_ttl_sec,
                 "an unanswered offload task is dropped after this")
      ->capture_default_str();
  app.add_option("--put_offload_wait_ms", c.put_offload_wait_ms,
                 "how long a put may wait for SSD copies to free DRAM")
      ->capture_default_str();
  app.add_flag("--put_waits_for_holders", c.put_waits_for_holders,
               "a put answers once its holders recorded it (survives a "
               "master crash right after the answer)");
  app.add_option("--holder_ack_timeout_ms", c.holder_ack_timeout_ms,
                 "a remove or upsert waits this long at most for the holders "
                 "of the old value to delete it (0 = no wait)")
      ->capture_default_str();
  app.add_option("--data_capabilities", c.data_capabilities,
                 "sign data-plane capabilities; false lets anyone who reaches "
                 "a node read and write its memory (docs/security.md)")
      ->capture_default_str();
  app.add_option("--write_capability_ttl_ms", c.write_capability_ttl_ms,
                 "a put's write capability lives this long plus 10 ms per "
                 "MiB (the window in which its client may write)")
      ->check(CLI::Range(int64_t{100}, int64_t{600000}))
      ->capture_default_str();
  app.add_flag("--promotion_on_hit", c.promotion_on_hit,
               "promote SSD-only keys that gets hit");
  app.add_option("--promotion_admission_threshold",
                 c.promotion_admission_threshold,
                 "hits (count-min sketch, decaying) before a key is promoted")
      ->capture_default_str();
  app.add_option("--promotion_queue_limit", c.promotion_queue_limit,
                 "promotions in flight at most, all paths together")
      ->capture_default_str();
  app.add_option("--promotion_max_per_heartbeat", c.promotion_max_per_heartbeat,
                 "promotion tasks handed to a holder per heartbeat")
      ->capture_default_str();
  app.add_option("--promotion_task_ttl_sec", c.promotion_task_ttl_sec,
                 "the reaper clears promotion tasks older than this")
      ->capture_default_str();
  app.add_flag("--enable_prefetch_trigger", c.enable_prefetch_trigger,
               "serve BatchPrefetchToMemory (router-triggered prefetch)");
  app.add_option("--prefetch_trigger_lease_ttl_ms",
                 c.prefetch_trigger_lease_ttl_ms,
                 "lease granted at enqueue by BatchPrefetchToMemory")
      ->capture_default_str();
  app.add_option("--prefetch_consumed_lease_ms", c.prefetch_consumed_lease_ms,
                 "0 = off; > 0: a get of a replica that lives only in a "
                 "prefetch buffer grants this lease, and the get that "
                 "consumes a key's last trigger drops the trigger's lease")
      ->capture_default_str();
  app.add_option("--prefetch_strict_buffer", c.prefetch_strict_buffer,
                 "router promotions land only in the holder's prefetch "
                 "buffer (when it has one)")
      ->capture_default_str();
  app.add_option("--max_key_bytes", c.max_key_bytes,
                 "longest key accepted, bytes (at most 4096, the data "
                 "plane's limit)")
      ->capture_default_str();
  app.add_option("--max_tenant_name_bytes", c.max_tenant_name_bytes,
                 "longest tenant name accepted, bytes")
      ->capture_default_str();
  app.add_option("--max_tenants", c.max_tenants,
                 "tenants besides the default one kept at once; a put that "
                 "would create one more is refused")
      ->capture_default_str();
  app.add_option("--version_floor_slots", c.version_floor_slots,
                 "slots of the table of version floors that keeps restarted "
                 "nodes from re-registering removed copies (8 bytes each)")
      ->capture_default_str();
  app.add_option("--rpc_handshake_timeout_ms", c.rpc_handshake_timeout_ms,
                 "a gRPC connection that has not completed its HTTP/2 "
                 "handshake this long after accept is closed")
      ->capture_default_str();
  app.add_option("--rpc_max_connection_idle_ms", c.rpc_max_connection_idle_ms,
                 "a gRPC connection with no call for this long is closed "
                 "(its client reconnects); 0 = never")
      ->capture_default_str();
  kvpool::AddSizeFlag(app, "--heap_trim_threshold_bytes",
                      &c.heap_trim_threshold_bytes,
                      "give freed heap memory back to the kernel once this "
                      "much has gathered since the last time; 0 = never");
  app.add_option("--cluster_secret_file", c.cluster_secret_file,
                 "file holding the cluster secret (hex, mode 0600); empty = "
                 "no authentication (docs/security.md)");
  app.add_option("--auth_max_clock_skew_ms", c.auth_max_clock_skew_ms,
                 "a credential token is refused once its issue time is this "
                 "far from the master's clock")
      ->capture_default_str();
  app.add_option("--tls_cert_file", c.tls_cert_file,
                 "PEM certificate; with --tls_key_file, serve gRPC over TLS");
  app.add_option("--tls_key_file", c.tls_key_file,
                 "PEM private key of --tls_cert_file");
  app.add_option("--tls_ca_file", c.tls_ca_file,
                 "PEM CA; set = require client certificates it signed");
  app.add_flag("--enable_ha", c.enable_ha,
               "one of several masters: campaign for leadership in etcd "
               "(docs/ha.md)");
  app.add_option("--etcd_endpoints", c.etcd_endpoints,
                 "etcd endpoints, h1:2379;h2:2379 (with --enable_ha)");
  app.add_option("--cluster_id", c.cluster_id,
                 "masters of one cluster share it (with --enable_ha)")
      ->capture_default_str();
  app.add_option("--ha_lease_ttl_sec", c.ha_lease_ttl_sec,
                 "the leader's etcd lease: a dead leader is replaced after "
                 "about this long")
      ->capture_default_str();
  app.add_option("--ha_advertise_host", c.ha_advertise_host,
                 "host others dial to reach this master when it leads "
                 "(default: --rpc_address)");
  app.add_option("--kv_events_endpoint", c.kv_events_endpoint,
                 "ZMQ PUB address for tier-change events in vLLM's KV-events "
                 "format, e.g. tcp://127.0.0.1:5557; empty = off "
                 "(docs/kv_events.md)");
  app.add_option("--kv_events_replay_endpoint", c.kv_events_replay_endpoint,
                 "ZMQ ROUTER address answering replay requests from a "
                 "sequence number; empty = no replay");
  app.add_option("--kv_events_topic", c.kv_events_topic,
                 "first frame of every KV events message");
  app.add_option("--kv_events_buffer_steps", c.kv_events_buffer_steps,
                 "KV event batches kept for replay")
      ->capture_default_str();
  app.add_option("--kv_events_hwm", c.kv_events_hwm,
                 "ZMQ send high-water mark of the KV events sockets; a "
                 "subscriber past it misses batches (0 = no limit)")
      ->capture_default_str();
  app.add_option("--kv_events_max_queue_size", c.kv_events_max_queue_size,
                 "tier changes queued for the publisher; when full they are "
                 "dropped and counted, and the sequence skips a number")
      ->capture_default_str();
  std::string port_file;
  app.add_option("--port_file", port_file,
                 "write the bound rpc port here (for scripts/tests)");
  CLI11_PARSE(app, argc, argv);
  // Connections are descriptors: a flood meets the hard limit, not a
  // default soft limit of 1024 (docs/security.md).
  kvpool::RaiseOpenFileLimit();

  // Stop from a plain thread: gRPC shutdown is not async-signal-safe. The
  // signals are blocked before Start makes any thread, as threads inherit
  // the mask: a thread that left them unblocked would take SIGTERM with its
  // default action and kill the master without a clean Stop.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  if (c.enable_ha) {
    if (auto s = c.Validate(); !s.ok()) {
      spdlog::error("cannot start: {}", s.ToString());
      return 1;
    }
    std::atomic<bool> stop{false};
    kvpool::ha::HaMaster ha(c);
    ha.set_on_server([&](kvpool::MasterServer& server) {
      kvpool::WritePortFile(port_file, server.rpc_port());
      std::printf(
          "kvpool-master (standby until it leads) on %s "
          "metrics_port=%d\n",
          server.address().c_str(), server.metrics_port());
      std::fflush(stdout);
    });
    std::thread waiter([&] {
      int sig = 0;
      sigwait(&set, &sig);
      spdlog::info("signal {}: stopping", sig);
      stop = true;
    });
    waiter.detach();  // the process ends with Run
    if (auto s = ha.Run(&stop); !s.ok()) {
      spdlog::error("cannot start: {}", s.ToString());
      return 1;
    }
    return 0;
  }
  kvpool::MasterServer server(c);
  if (auto s = server.Start(); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  kvpool::WritePortFile(port_file, server.rpc_port());
  std::printf("kvpool-master listening on %s metrics_port=%d\n",
              server.address().c_str(), server.metrics_port());
  std::fflush(stdout);
  g_server = &server;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    spdlog::info("signal {}: stopping", sig);
    g_server->Stop();
  });
  server.Wait();
  waiter.join();
  return 0;
}
