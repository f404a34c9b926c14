// kvpool: the command line. put/get/exist/rm/tier/stat against a running
// master, `cluster` to run a LocalCluster in the foreground, `demo` for the
// README's demo workload, `credential` for secrets and credentials, and
// `bench` for the benchmark tools.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/bench_main.h"
#include "bench/soak_bench.h"
#include "bench/ssd_bench.h"
#include "common/absl_runtime.h"
#include "common/auth.h"
#include "kvpool/client.h"
#include "kvpool/local_cluster.h"
#include "tools/demo.h"
#include "tools/flags.h"
#include "tools/replay_cmd.h"
#include "tools/scale_sim_cmd.h"
#include "tools/trace_gen_cmd.h"

namespace {

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}

int Fail(const kvpool::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 2;
}

// `kvpool credential`: what it writes is a key, so a file gets mode 0600.
int WriteCredential(bool new_secret, const std::string& secret_file,
                    const std::string& tenant, bool admin,
                    const std::string& out) {
  using kvpool::ErrorCode;
  using kvpool::Status;
  namespace auth = kvpool::auth;
  std::string text;
  if (new_secret) {
    if (out.empty()) {
      return Fail(Status(ErrorCode::INVALID_PARAMS,
                         "--new-secret needs --out (the secret belongs in a "
                         "file, not a terminal)"));
    }
    // Overwriting the secret in use would lock every peer out.
    if (access(out.c_str(), F_OK) == 0) {
      return Fail(Status(ErrorCode::INVALID_PARAMS,
                         out + " exists; remove it first to replace it"));
    }
    text = auth::ClusterSecret::Generate().ToHex() + "\n";
  } else {
    if (secret_file.empty() || (tenant.empty() && !admin)) {
      return Fail(Status(ErrorCode::INVALID_PARAMS,
                         "need --cluster_secret_file and --tenant T or "
                         "--admin (or --new-secret --out PATH)"));
    }
    auto secret = auth::ClusterSecret::Load(secret_file);
    if (!secret.ok()) return Fail(secret.status());
    auto c =
        admin
            ? auth::MakeCredential(secret.value(), auth::Role::kAdmin, "admin")
            : auth::MakeCredential(secret.value(), auth::Role::kTenant, tenant);
    if (!c.ok()) return Fail(c.status());
    text = auth::FormatCredentialFile(c.value());
  }
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (Status s = auth::WritePrivateFile(out, text); !s.ok()) return Fail(s);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kvpool::ConfigureAbslRuntime();
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"kvpool: command line of the kvpool KV-cache store"};
  app.require_subcommand(1);
  kvpool::ClientConfig cc;
  std::string transport = "auto";
  app.add_option("--master", cc.master_server_address,
                 "HOST:PORT of kvpool-master")
      ->capture_default_str();
  app.add_option("--tenant", cc.tenant, "tenant of the keys")
      ->capture_default_str();
  app.add_option("--transport", transport, "auto, shm or tcp")
      ->capture_default_str();
  app.add_option("--rpc_timeout_ms", cc.rpc_timeout_ms,
                 "deadline of each master RPC")
      ->capture_default_str();
  app.add_option("--data_connect_timeout_ms", cc.data_connect_timeout_ms,
                 "TCP data plane: connect limit")
      ->capture_default_str();
  app.add_option("--data_io_timeout_ms", cc.data_io_timeout_ms,
                 "TCP data plane: a transfer with no progress for this long "
                 "fails (a hung node)")
      ->capture_default_str();
  app.add_option("--data_tls_ca_file", cc.data_tls_ca_file,
                 "TCP data plane: PEM CA of the nodes' certificates; set = "
                 "TLS to nodes");
  app.add_option("--credential_file", cc.credential_file,
                 "credential from `kvpool credential`, or the cluster secret "
                 "file (= admin); for a master with authentication");
  app.add_option("--tls_ca_file", cc.tls_ca_file,
                 "PEM CA of the master's certificate; set = TLS to the master");
  app.add_option("--tls_cert_file", cc.tls_cert_file,
                 "PEM client certificate, for a master that requires one");
  app.add_option("--tls_key_file", cc.tls_key_file,
                 "PEM key of --tls_cert_file");

  std::string key, file;
  std::vector<std::string> keys;
  bool force = false, json = false;

  auto* put = app.add_subcommand("put", "store FILE's bytes under KEY");
  put->add_option("key", key)->required();
  put->add_option("file", file)->required();
  int put_count = 1;
  put->add_option("--count", put_count,
                  "store them under KEY-0 .. KEY-<count-1> in one batch put")
      ->check(CLI::Range(1, 65536));
  auto* get =
      app.add_subcommand("get", "write KEY's bytes to FILE (- for stdout)");
  get->add_option("key", key)->required();
  get->add_option("file", file)->required();
  auto* exist = app.add_subcommand("exist", "print 1/0 per key");
  exist->add_option("keys", keys)->required();
  auto* rm = app.add_subcommand("rm", "remove a key");
  rm->add_flag("--force", force, "remove even if leased");
  rm->add_option("key", key)->required();
  auto* tier = app.add_subcommand("tier", "read-only tier lookup per key");
  tier->add_option("keys", keys)->required();
  tier->add_flag("--json", json, "JSON output");
  auto* stat = app.add_subcommand("stat", "cluster statistics");
  stat->add_flag("--json", json, "JSON output");

  std::string secret_file, cred_tenant, cred_out;
  bool cred_admin = false, new_secret = false;
  auto* credential = app.add_subcommand(
      "credential",
      "write a tenant's or the admin's credential, or a new cluster secret "
      "(docs/security.md); files are written with mode 0600");
  credential->add_option("--cluster_secret_file", secret_file,
                         "the cluster secret the credential derives from");
  auto* cred_tenant_opt = credential->add_option(
      "--tenant", cred_tenant, "a credential for this tenant only");
  auto* cred_admin_opt = credential->add_flag(
      "--admin", cred_admin, "an admin credential (every tenant, stats)");
  auto* new_secret_opt = credential->add_flag(
      "--new-secret", new_secret, "write a fresh random cluster secret");
  cred_tenant_opt->excludes(cred_admin_opt)->excludes(new_secret_opt);
  cred_admin_opt->excludes(new_secret_opt);
  credential->add_option("--out", cred_out,
                         "file to write (mode 0600); default: standard output");

  kvpool::LocalClusterOptions lco;
  int duration_sec = 0;
  auto* cluster =
      app.add_subcommand("cluster", "run a LocalCluster in the foreground");
  cluster->add_option("--nodes", lco.num_nodes, "number of nodes")
      ->capture_default_str();
  kvpool::AddSizeFlag(*cluster, "--segment_size", &lco.segment_size,
                      "DRAM per node");
  cluster
      ->add_option("--rpc_port", lco.master_port, "master gRPC port; 0 = any")
      ->capture_default_str();
  cluster
      ->add_option("--metrics_port", lco.metrics_port,
                   "master HTTP port; 0 = any, -1 = off")
      ->capture_default_str();
  cluster->add_option("--cluster_secret_file", lco.cluster_secret_file,
                      "master and nodes authenticate with this secret");
  cluster
      ->add_option("--duration_sec", duration_sec,
                   "stop after N s (0 = until Ctrl-C)")
      ->capture_default_str();

  kvpool::DemoOptions demo_opts;
  auto* demo = app.add_subcommand(
      "demo", "LocalCluster with two nodes + a short workload");
  demo->add_option("--keys", demo_opts.keys, "keys to put")
      ->capture_default_str();
  kvpool::AddSizeFlag(*demo, "--value_size", &demo_opts.value_size,
                      "bytes per value");

  kvpool::BenchOptions bench_opts;
  auto* bench = app.add_subcommand(
      "bench", "benchmarks (tables with same-run baselines)");
  bench->require_subcommand(1);
  auto* bench_transfer = bench->add_subcommand(
      "transfer", "put/get GB/s and latency, shm and TCP");
  bench_transfer->add_option("--json", bench_opts.json_path,
                             "also write JSON here");
  bench_transfer->add_option("--svg", bench_opts.svg_path,
                             "also draw an SVG chart here");
  bench_transfer
      ->add_option("--seconds", bench_opts.seconds_per_case, "time per case")
      ->capture_default_str();
  bench_transfer
      ->add_option("--sizes", bench_opts.transfer_sizes, "value sizes (bytes)")
      ->capture_default_str();
  bench_transfer
      ->add_option("--batches", bench_opts.transfer_batches, "batch sizes")
      ->capture_default_str();
  bench_transfer->add_flag(
      "--security", bench_opts.transfer_security,
      "instead: the cost of authentication and data-plane capabilities "
      "(an open and a secure cluster side by side, batch 1)");
  bench_transfer
      ->add_option("--security-rounds", bench_opts.security_rounds,
                   "--security: rounds, each on freshly started clusters")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bench_transfer
      ->add_option("--security-instructions", bench_opts.security_instructions,
                   "--security under valgrind --tool=callgrind: count the "
                   "instructions of this many ops per arm and case instead of "
                   "timing them (docs/security.md)")
      ->check(CLI::Range(0, 1000000));
  bench_transfer->add_flag(
      "--multi-buffer", bench_opts.transfer_multi_buffer,
      "instead: multi-buffer (scatter/gather) puts and gets against the "
      "single-buffer calls moving the same bytes (batch 16)");
  auto* bench_master =
      bench->add_subcommand("master", "tier lookups/s and bytes per object");
  bench_master->add_option("--json", bench_opts.json_path,
                           "also write JSON here");
  bench_master
      ->add_option("--objects", bench_opts.objects,
                   "objects for the memory figure")
      ->capture_default_str();
  bench_master
      ->add_option("--seconds", bench_opts.seconds_per_case, "time per case")
      ->capture_default_str();
  bench_master->add_flag(
      "--calls-only", bench_opts.master_calls_only,
      "only the per-call latency of exist/get/put at batch 1 and 128");

  auto* bench_pressure = bench->add_subcommand(
      "pressure",
      "3x DRAM of 1 MiB puts with offload: latency, copies, losses");
  bench_pressure->add_option("--json", bench_opts.json_path,
                             "also write JSON here");
  bench_pressure->add_option("--svg", bench_opts.svg_path,
                             "put latency over time as SVG");
  bench_pressure->add_option("--dir", bench_opts.dir,
                             "scratch directory for SSD files");
  kvpool::AddSizeFlag(*bench_pressure, "--dram",
                      &bench_opts.pressure_dram_bytes, "pool DRAM");

  auto* bench_exist = bench->add_subcommand(
      "exist-prefetch",
      "prefetch-on-exist: caller cost per key, DRAM share of gets vs gap");
  bench_exist->add_option("--json", bench_opts.json_path,
                          "also write JSON here");
  bench_exist->add_option("--svg", bench_opts.svg_path,
                          "DRAM share vs gap as SVG");
  bench_exist->add_option("--dir", bench_opts.dir,
                          "scratch directory for SSD files");
  bench_exist
      ->add_option("--reps", bench_opts.exist_reps, "off/on(dedup) pairs")
      ->capture_default_str();
  bench_exist
      ->add_option("--fresh_reps", bench_opts.exist_fresh_reps,
                   "off/on(fresh) pairs, 128 new SSD-only keys each")
      ->capture_default_str();
  bench_exist
      ->add_option("--keys", bench_opts.keys_per_cell,
                   "SSD-only keys per gap and column")
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_exist, "--value_size", &bench_opts.value_bytes,
                      "bytes per value");
  kvpool::AddSizeFlag(*bench_exist, "--dram", &bench_opts.node_dram_bytes,
                      "DRAM per node");

  auto* bench_tier = bench->add_subcommand(
      "tier-latency",
      "get p50/p99 from DRAM, local SSD and remote SSD vs O_DIRECT pread");
  bench_tier->add_option("--json", bench_opts.json_path,
                         "also write JSON here");
  bench_tier->add_option("--dir", bench_opts.dir,
                         "scratch directory for SSD files");
  bench_tier->add_option("--samples", bench_opts.tier_samples, "gets per case")
      ->capture_default_str();
  bench_tier
      ->add_option("--keys", bench_opts.tier_keys,
                   "SSD-only keys per value size")
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_tier, "--dram", &bench_opts.node_dram_bytes,
                      "DRAM per node");

  auto* bench_router = bench->add_subcommand(
      "router-prefetch",
      "DRAM share vs trigger->get window, promotions/s per holder");
  bench_router->add_option("--json", bench_opts.json_path,
                           "also write JSON here");
  bench_router->add_option("--svg", bench_opts.svg_path,
                           "DRAM share vs window as SVG");
  bench_router->add_option("--dir", bench_opts.dir,
                           "scratch directory for SSD files");
  bench_router
      ->add_option("--requests", bench_opts.router_requests,
                   "requests per window and holder mode")
      ->capture_default_str();
  bench_router
      ->add_option("--blocks", bench_opts.router_blocks,
                   "SSD-only blocks per request")
      ->capture_default_str();
  bench_router
      ->add_option("--rate_keys", bench_opts.router_rate_keys,
                   "blocks triggered at once for the promotion rate")
      ->capture_default_str();
  bench_router->add_flag("--rate_only", bench_opts.router_rate_only,
                         "only part (b), the promotion rate");
  bench_router
      ->add_option("--rate_modes", bench_opts.router_rate_modes,
                   "holder modes of part (b) (default: all)")
      ->delimiter(',');
  bench_router
      ->add_option("--rate_rounds", bench_opts.router_rate_rounds,
                   "rounds of part (b): every mode, then fio, per round; "
                   "medians reported")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  bench_router
      ->add_option("--rate_puts", bench_opts.router_rate_puts,
                   "a second client puts 1 MiB values while promotions run")
      ->capture_default_str();
  bench_router
      ->add_option("--segment_dir", bench_opts.segment_dir,
                   "where the nodes create their segment files (a huge tmpfs "
                   "gives them 2 MiB pages)")
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_router, "--block_size",
                      &bench_opts.router_block_bytes, "bytes per block");
  kvpool::AddSizeFlag(*bench_router, "--dram", &bench_opts.node_dram_bytes,
                      "main DRAM per node");

  auto* bench_restart = bench->add_subcommand(
      "restart",
      "master restart and dead-node return: time to a fully served pool");
  bench_restart->add_option("--json", bench_opts.json_path,
                            "also write JSON here");
  bench_restart->add_option("--svg", bench_opts.svg_path,
                            "time to fully served vs N as SVG");
  bench_restart
      ->add_option("--objects", bench_opts.restart_objects,
                   "object counts N to run (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_restart, "--value_size",
                      &bench_opts.restart_value_bytes, "bytes per value");
  bench_restart
      ->add_option("--lease_ttl_ms", bench_opts.restart_lease_ttl_ms,
                   "master default_kv_lease_ttl (re-mounted segments are "
                   "closed this long)")
      ->capture_default_str();
  bench_restart
      ->add_option("--client_ttl", bench_opts.restart_client_ttl_sec,
                   "master client_ttl: s of silence until a node is dead")
      ->capture_default_str();
  bench_restart
      ->add_option("--samples", bench_opts.restart_samples,
                   "values read back byte-exact after the restart")
      ->capture_default_str();
  bench_restart->add_flag("--baseline_largest_only",
                          bench_opts.restart_baseline_largest_only,
                          "run the directory-off baseline for the largest N "
                          "only (by default for every N)");

  auto* bench_failover = bench->add_subcommand(
      "failover",
      "HA: kill -9 of the leading master at N objects, time until the "
      "standby serves them (docs/results/ha/failover-at-n.md)");
  bench_failover->add_option("--json", bench_opts.json_path,
                             "also write JSON here");
  bench_failover->add_option("--svg", bench_opts.svg_path,
                             "failover times vs N as SVG");
  bench_failover
      ->add_option("--objects", bench_opts.failover_objects,
                   "object counts N to run (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_failover, "--value_size",
                      &bench_opts.failover_value_bytes, "bytes per value");
  bench_failover
      ->add_option("--runs", bench_opts.failover_runs,
                   "kills per N, each on a fresh cluster")
      ->capture_default_str();
  bench_failover
      ->add_option("--samples", bench_opts.failover_samples,
                   "values read back byte-exact after the failover")
      ->capture_default_str();
  bench_failover
      ->add_option("--ha_lease_ttl_sec", bench_opts.failover_ha_lease_ttl_sec,
                   "masters' leadership lease in etcd")
      ->capture_default_str();
  bench_failover
      ->add_option("--lease_ttl_ms", bench_opts.failover_lease_ttl_ms,
                   "masters' default_kv_lease_ttl (re-mounted segments are "
                   "closed this long)")
      ->capture_default_str();
  bench_failover
      ->add_option("--client_ttl", bench_opts.failover_client_ttl_sec,
                   "masters' client_ttl: s of silence until a node is dead")
      ->capture_default_str();
  bench_failover
      ->add_option("--timeout", bench_opts.failover_timeout_sec,
                   "s each wait may take (puts, directories, recovery)")
      ->capture_default_str();
  bench_failover->add_flag(
      "--no_put_waits", bench_opts.failover_no_put_waits,
      "masters without put_waits_for_holders (by default on: a put is "
      "acknowledged once its node's directory holds it)");
  bench_failover->add_flag(
      "--no_recovery_sweep", bench_opts.failover_no_recovery_sweep,
      "no exist passes during the recovery (a control): all_served is the "
      "later node's re-registration, checked by one sweep after");

  auto* bench_envelope = bench->add_subcommand(
      "master-envelope",
      "where one master stops: memory, lookups, puts, heartbeats, "
      "eviction, node death, restart vs object count "
      "(docs/master_envelope.md)");
  bench_envelope->add_option("--json", bench_opts.json_path,
                             "also write JSON here (steps[i].objects, ...)");
  bench_envelope->add_option(
      "--svg", bench_opts.svg_path,
      "write PREFIX-memory/-lookups/-latency/-holds.svg");
  bench_envelope
      ->add_option("--steps", bench_opts.envelope_steps,
                   "object counts to grow through (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  bench_envelope
      ->add_option("--nodes", bench_opts.envelope_nodes,
                   "fake nodes, one segment each")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  bench_envelope
      ->add_option("--threads", bench_opts.envelope_threads,
                   "lookup client threads to run (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  bench_envelope
      ->add_option("--put-window", bench_opts.envelope_put_window,
                   "timed puts at the end of each fill")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  bench_envelope
      ->add_option("--seconds", bench_opts.seconds_per_case,
                   "time per lookup case")
      ->capture_default_str();

  kvpool::SoakOptions soak_opts;
  auto* bench_soak = bench->add_subcommand(
      "soak",
      "master + 2 nodes (processes, SSD tier, prefetch) under a mixed load "
      "that checks every read; RSS/fds/threads/SSD/latency over time");
  bench_soak->add_option("--minutes", soak_opts.minutes, "how long to run")
      ->capture_default_str();
  bench_soak
      ->add_option("--clients", soak_opts.clients,
                   "load threads, each with its own Client and key prefix")
      ->capture_default_str();
  bench_soak
      ->add_option("--sample-seconds", soak_opts.sample_seconds,
                   "sampling interval")
      ->capture_default_str();
  bench_soak->add_option("--dir", soak_opts.dir,
                         "scratch directory for SSD files and logs (a "
                         "kvpool-soak-PID directory inside it, removed at "
                         "the end; default: the temp directory)");
  bench_soak->add_option("--json", soak_opts.json_path, "also write JSON here");
  bench_soak->add_option("--svg", soak_opts.svg_prefix,
                         "write PREFIX_rss.svg and PREFIX_p99.svg");
  bench_soak->add_option("--keys", soak_opts.keys_per_client, "keys per client")
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_soak, "--dram", &soak_opts.node_dram_bytes,
                      "DRAM per node");
  kvpool::AddSizeFlag(*bench_soak, "--ssd", &soak_opts.node_ssd_bytes,
                      "SSD capacity per node");
  bench_soak->add_flag("--keep_dir", soak_opts.keep_dir,
                       "leave the scratch directory (logs, SSD files)");

  kvpool::SsdBenchOptions ssd_opts;
  auto* bench_ssd =
      bench->add_subcommand("ssd", "FileStorage O_DIRECT reads vs fio");
  bench_ssd->add_option("--json", ssd_opts.json_path, "also write JSON here");
  bench_ssd
      ->add_option("--dir", ssd_opts.dir, "directory on the device under test")
      ->capture_default_str();
  bench_ssd->add_option("--seconds", ssd_opts.seconds_per_case, "time per case")
      ->capture_default_str();
  kvpool::AddSizeFlag(*bench_ssd, "--dataset", &ssd_opts.dataset_bytes,
                      "bytes stored per size");
  bench_ssd->add_option("--rounds", ssd_opts.rounds, "alternations per case")
      ->capture_default_str();
  bench_ssd
      ->add_option("--sizes", ssd_opts.object_sizes, "object sizes (bytes)")
      ->capture_default_str();
  bench_ssd->add_option("--depths", ssd_opts.depths, "queue depths")
      ->capture_default_str();
  bench_ssd
      ->add_option("--io_backend", ssd_opts.io_backend,
                   "FileStorage I/O: auto, io_uring or pread")
      ->capture_default_str();
  bench_ssd->add_flag("--small_pages{false}", ssd_opts.huge_page_dest,
                      "both sides read into 4 KiB pages instead of memory "
                      "advised MADV_HUGEPAGE");
  bench_ssd->add_flag("--keep_files", ssd_opts.keep_files,
                      "leave the stores in --dir for inspection");

  auto replay_cmd = kvpool::AddReplayCommand(app);
  auto trace_gen_cmd = kvpool::AddTraceGenCommand(app);
  auto scale_sim_cmd = kvpool::AddScaleSimCommand(app);

  kvpool::EtcdFlags etcd_flags;
  kvpool::AddEtcdFlags(app, &etcd_flags);
  CLI11_PARSE(app, argc, argv);
  cc.master_server_address =
      kvpool::MasterAddress(etcd_flags, cc.master_server_address);

  if (transport == "shm") {
    cc.transport = kvpool::TransportMode::kShm;
  } else if (transport == "tcp") {
    cc.transport = kvpool::TransportMode::kTcp;
  } else if (transport != "auto") {
    std::fprintf(stderr, "error: --transport must be auto, shm or tcp\n");
    return 2;
  }

  if (*credential)
    return WriteCredential(new_secret, secret_file, cred_tenant, cred_admin,
                           cred_out);
  if (*cluster) {
    kvpool::LocalCluster lc(lco);
    if (auto s = lc.Start(); !s.ok()) return Fail(s);
    std::printf(
        "LocalCluster up: master %s, metrics port %d, %zu nodes of %s\n",
        lc.master_address().c_str(), lc.metrics_port(), lc.num_nodes(),
        kvpool::FormatSize(lco.segment_size).c_str());
    std::fflush(stdout);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    if (duration_sec > 0) {
      timespec ts{duration_sec, 0};
      sigtimedwait(&set, nullptr, &ts);
    } else {
      int sig;
      sigwait(&set, &sig);
    }
    lc.Stop();
    return 0;
  }
  if (*demo) return kvpool::RunDemo(demo_opts);
  if (replay_cmd->chosen()) return replay_cmd->Run();
  if (trace_gen_cmd->chosen()) return trace_gen_cmd->Run();
  if (scale_sim_cmd->chosen()) return scale_sim_cmd->Run();
  if (*bench_transfer) {
    if (bench_opts.transfer_multi_buffer)
      return kvpool::RunMultiBufferBench(bench_opts);
    return bench_opts.transfer_security
               ? kvpool::RunSecurityCostBench(bench_opts)
               : kvpool::RunTransferBench(bench_opts);
  }
  if (*bench_master) return kvpool::RunMasterBench(bench_opts);
  if (*bench_pressure) return kvpool::RunPressureBench(bench_opts);
  if (*bench_router) return kvpool::RunRouterPrefetchBench(bench_opts);
  if (*bench_ssd) return kvpool::RunSsdBench(ssd_opts);
  if (*bench_exist) return kvpool::RunExistPrefetchBench(bench_opts);
  if (*bench_tier) return kvpool::RunTierLatencyBench(bench_opts);
  if (*bench_restart) return kvpool::RunRestartBench(bench_opts);
  if (*bench_failover) return kvpool::RunFailoverBench(bench_opts);
  if (*bench_envelope) return kvpool::RunMasterEnvelopeBench(bench_opts);
  if (*bench_soak) return kvpool::RunSoakBench(soak_opts);

  auto created = kvpool::Client::Create(cc);
  if (!created.ok()) return Fail(created.status());
  auto& client = *created.value();

  if (*put) {
    std::ifstream in(file, std::ios::binary);
    if (!in)
      return Fail(kvpool::Status(kvpool::ErrorCode::FILE_NOT_FOUND, file));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string value = ss.str();
    if (put_count == 1) {
      if (auto s = client.Put(key, value); !s.ok()) return Fail(s);
      std::printf("put %s: %zu bytes\n", key.c_str(), value.size());
      return 0;
    }
    std::vector<std::string> batch_keys;
    for (int i = 0; i < put_count; ++i)
      batch_keys.push_back(key + "-" + std::to_string(i));
    const auto results = client.BatchPut(
        batch_keys, std::vector<std::string_view>(batch_keys.size(), value));
    int rc = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      if (results[i].ok()) continue;
      std::fprintf(stderr, "put %s: %s\n", batch_keys[i].c_str(),
                   results[i].ToString().c_str());
      rc = 1;
    }
    std::printf("put %d keys of %zu bytes, %s\n", put_count, value.size(),
                rc == 0 ? "all stored" : "some failed");
    return rc;
  }
  if (*get) {
    auto r = client.Get(key);
    if (!r.ok()) return Fail(r.status());
    if (file == "-") {
      std::fwrite(r->data(), 1, r->size(), stdout);
    } else {
      std::ofstream out(file, std::ios::binary);
      out.write(r->data(), static_cast<std::streamsize>(r->size()));
      if (!out)
        return Fail(kvpool::Status(kvpool::ErrorCode::FILE_WRITE_FAIL, file));
      std::printf("get %s: %zu bytes -> %s\n", key.c_str(), r->size(),
                  file.c_str());
    }
    return 0;
  }
  if (*exist) {
    auto r = client.BatchIsExist(keys);
    int rc = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!r[i].ok()) {
        std::printf("%s\terror %s\n", keys[i].c_str(),
                    r[i].status().ToString().c_str());
        rc = 2;
      } else {
        std::printf("%s\t%d\n", keys[i].c_str(), r[i].value() ? 1 : 0);
      }
    }
    return rc;
  }
  if (*rm) {
    if (auto s = client.Remove(key, force); !s.ok()) return Fail(s);
    std::printf("removed %s\n", key.c_str());
    return 0;
  }
  if (*tier) {
    auto r = client.BatchGetReplicaDesc(keys);
    std::string out = "[";
    for (size_t i = 0; i < keys.size(); ++i) {
      if (json) {
        if (i) out += ",";
        out += "{\"key\":\"" + JsonEscape(keys[i]) + "\"";
        if (!r[i].ok()) {
          out += ",\"error\":\"" +
                 std::string(kvpool::ErrorCodeName(r[i].code())) + "\"}";
          continue;
        }
        out += ",\"size\":" + std::to_string(r[i]->size) + ",\"tier\":\"" +
               r[i]->BestTier() + "\",\"lease_remaining_ms\":" +
               std::to_string(r[i]->lease_remaining_ms) + ",\"replicas\":[";
        for (size_t j = 0; j < r[i]->replicas.size(); ++j) {
          const auto& rep = r[i]->replicas[j];
          if (j) out += ",";
          out +=
              std::string("{\"kind\":\"") +
              (rep.kind == kvpool::ReplicaInfo::Kind::kMemory ? "memory"
                                                              : "local_disk") +
              "\",\"complete\":" + (rep.complete ? "true" : "false") +
              ",\"node\":\"" + JsonEscape(rep.node_id) + "\",\"endpoint\":\"" +
              rep.data_endpoint + "\"}";
        }
        out += "]}";
      } else if (!r[i].ok()) {
        std::printf("%s\t%s\n", keys[i].c_str(),
                    r[i].status().ToString().c_str());
      } else {
        std::printf("%s\t%s\t%lu bytes\t%zu replica(s)\tlease %ld ms\n",
                    keys[i].c_str(), r[i]->BestTier().c_str(), r[i]->size,
                    r[i]->replicas.size(),
                    std::max<int64_t>(0, r[i]->lease_remaining_ms));
      }
    }
    if (json) std::printf("%s]\n", out.c_str());
    return 0;
  }
  if (*stat) {
    auto r = client.Stat();
    if (!r.ok()) return Fail(r.status());
    if (json) {
      std::string segs;
      for (const auto& s : r->segments) {
        if (!segs.empty()) segs += ",";
        segs += "{\"id\":" + std::to_string(s.segment_id) + ",\"node\":\"" +
                JsonEscape(s.node_id) + "\",\"kind\":\"" + s.kind +
                "\",\"capacity\":" + std::to_string(s.capacity) +
                ",\"used\":" + std::to_string(s.used) + "}";
      }
      std::printf(
          "{\"objects\":%lu,\"memory_replicas\":%lu,\"evictions\":%lu,"
          "\"segments\":[%s]}\n",
          r->objects, r->memory_replicas, r->evictions, segs.c_str());
    } else {
      std::printf("objects %lu, memory replicas %lu, evictions %lu\n",
                  r->objects, r->memory_replicas, r->evictions);
      for (const auto& s : r->segments) {
        std::printf(
            "  segment %lu node %s %s: %s used of %s (%.1f%%) at %s\n",
            s.segment_id, s.node_id.c_str(), s.kind.c_str(),
            kvpool::FormatSize(s.used).c_str(),
            kvpool::FormatSize(s.capacity).c_str(),
            s.capacity ? 100.0 * double(s.used) / double(s.capacity) : 0.0,
            s.data_endpoint.c_str());
      }
    }
    return 0;
  }
  return 0;
}
