// kvpool-router: the reference router of the router-triggered prefetch
// (docs/router.md). Looks up the tiers of a request's block keys, triggers
// SSD->DRAM prefetch for the SSD-only blocks of the matched prefix and picks
// an engine, over HTTP/JSON.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/absl_runtime.h"
#include "common/fd_limits.h"
#include "kvpool/router.h"
#include "router/router_http.h"
#include "tools/flags.h"

int main(int argc, char** argv) {
  kvpool::ConfigureAbslRuntime();
  kvpool::RouterConfig c;
  std::string listen = "127.0.0.1:8088";
  std::vector<std::string> engine_specs;
  CLI::App app{"kvpool-router: tier-aware request router with SSD prefetch"};
  app.set_config("--config", "",
                 "TOML/INI file with the same keys as the flags");
  app.add_option("--master_server_address", c.master_server_address,
                 "kvpool-master gRPC address")
      ->capture_default_str();
  app.add_option("--listen", listen, "HTTP host:port (port 0 = any free)")
      ->capture_default_str();
  app.add_option("--engine", engine_specs,
                 "an engine: id=ID,nodes=NODE1;NODE2,endpoint=URL"
                 "[,max_running=N][,max_loading=N] (repeatable; nodes = "
                 "kvpool node ids on its host; max_running = its "
                 "max_num_seqs, max_loading = the KV loads it runs at once, "
                 "for --prefetch_deadline)");
  app.add_flag("--enable_prefetch,!--disable_prefetch", c.enable_prefetch,
               "trigger SSD->DRAM prefetch for SSD-only prefix blocks (on by "
               "default; --enable_prefetch=false or --disable_prefetch)");
  app.add_option("--rpc_timeout_ms", c.rpc_timeout_ms,
                 "deadline of each master RPC")
      ->capture_default_str();
  AddMasterSecurityFlags(app, &c);
  app.add_option("--data_tls_ca_file", c.data_tls_ca_file,
                 "PEM CA of the nodes' data plane certificates; set = TLS "
                 "to nodes' data servers");
  app.add_flag("--prefetch_deadline", c.prefetch_deadline,
               "triggers carry the estimated time of the engine's read "
               "(earliest deadline first; too late = dropped as expired)");
  app.add_option("--prefetch_deadline_floor_ms", c.prefetch_deadline_floor_ms,
                 "the deadline when nothing is queued ahead")
      ->capture_default_str();
  app.add_option("--prefetch_deadline_slack", c.prefetch_deadline_slack,
                 "multiplier on the queue-wait estimate")
      ->capture_default_str();
  app.add_flag("--prefetch_deadline_by_admissions",
               c.prefetch_deadline_by_admissions,
               "time the queue ahead by the engine's measured admission rate "
               "(needs reported queues) instead of its completion interval");
  app.add_option("--affinity_weight", c.affinity_weight,
                 "dispatch: an engine costs its requests in flight + this x "
                 "max(1, mean in flight) x the share of the prefix held off "
                 "its host; the cheapest wins (negative: pure affinity)")
      ->capture_default_str();
  app.add_option("--kv_events", c.kv_events_endpoint,
                 "the master's KV events endpoint (its --kv_events_endpoint, "
                 "e.g. tcp://master:5557): route from a tier map kept from "
                 "the stream, look up only keys without fresh state "
                 "(docs/kv_events.md)");
  app.add_option("--kv_events_replay", c.kv_events_replay_endpoint,
                 "the master's KV events replay endpoint: fills gaps in the "
                 "stream (without it every gap is a resync by lookup)");
  app.add_option("--kv_events_topic", c.kv_events_topic,
                 "the master's --kv_events_topic");
  app.add_option("--kv_events_map_capacity", c.kv_events_map_capacity,
                 "keys the tier map holds; past it the least recently "
                 "updated go and unknown keys are looked up")
      ->capture_default_str();
  std::string port_file;
  app.add_option("--port_file", port_file,
                 "write the bound HTTP port here (for scripts/tests)");
  kvpool::EtcdFlags etcd_flags;
  kvpool::AddEtcdFlags(app, &etcd_flags);
  CLI11_PARSE(app, argc, argv);
  // Connections are descriptors: a flood meets the hard limit, not a
  // default soft limit of 1024 (docs/security.md).
  kvpool::RaiseOpenFileLimit();
  c.master_server_address =
      kvpool::MasterAddress(etcd_flags, c.master_server_address);

  for (const auto& spec : engine_specs) {
    auto e = kvpool::ParseEngineSpec(spec);
    if (!e.ok()) {
      spdlog::error("--engine: {}", e.status().message());
      return 2;
    }
    c.engines.push_back(std::move(e.value()));
  }
  size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(listen.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (colon == std::string::npos || colon == 0 || port < 0 || port > 65535) {
    spdlog::error("--listen: expected host:port, got '{}'", listen);
    return 2;
  }
  std::string host = listen.substr(0, colon);

  // Blocked before any thread starts so every thread inherits the mask and
  // the signal reaches only the sigwait below.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto router = kvpool::Router::Create(c);
  if (!router.ok()) {
    spdlog::error("cannot start: {}", router.status().ToString());
    return 1;
  }
  if (c.engines.empty()) {
    spdlog::warn(
        "no --engine given: requests are looked up and prefetched "
        "but not dispatched");
  }
  kvpool::RouterHttpServer server(router.value().get());
  if (auto s = server.Start(host, port); !s.ok()) {
    spdlog::error("cannot start: {}", s.ToString());
    return 1;
  }
  kvpool::WritePortFile(port_file, server.port());
  std::printf(
      "kvpool-router listening on %s:%d master=%s engines=%zu "
      "prefetch=%s kv_events=%s\n",
      host.c_str(), server.port(), c.master_server_address.c_str(),
      c.engines.size(), c.enable_prefetch ? "on" : "off",
      c.kv_events_endpoint.empty() ? "off" : c.kv_events_endpoint.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("signal {}: stopping", sig);
  server.Stop();
  return 0;
}
