// fuzz_config: the --config file parser of kvpool's binaries (CLI11's
// TOML/INI reader, set up as tools/kvpool_master.cc and kvpool_node.cc set
// it up: set_config("--config"), options of every type they use, a size
// flag through tools/flags.h's AddSizeFlag, a CLI::Range check, flags).
//
// Invariants checked (docs/fuzzing.md):
//  1. Parsing a file either succeeds or throws a CLI::ParseError (what
//     CLI11_PARSE in main() turns into a message and an exit code); any
//     other exception would reach std::terminate in the binary.
//  2. On success every value honours its checks: the ranged option is in
//     [100, 600000], the size option is a value ParseSize accepts (its
//     FormatSize parses back to it).
//  3. Parsing is deterministic: the same file gives the same values.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/size_parse.h"
#include "tools/flags.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "INVARIANT VIOLATED: %s\n", what);
  std::abort();
}

struct Config {
  std::string rpc_address = "0.0.0.0";
  int rpc_port = 50051;
  int metrics_port = 9003;
  int64_t default_kv_lease_ttl = 5000;
  double eviction_high_watermark_ratio = 0.95;
  uint64_t max_tenants = 1024;
  bool enable_offload = false;
  bool data_capabilities = true;
  int64_t write_capability_ttl_ms = 10000;
  uint64_t global_segment_size = uint64_t{64} << 20;
  std::vector<std::string> engines;
};

bool SameValues(const Config& a, const Config& b) {
  // NaN compares unequal to itself; compare the ratio's bits as text.
  return a.rpc_address == b.rpc_address && a.rpc_port == b.rpc_port &&
         a.metrics_port == b.metrics_port &&
         a.default_kv_lease_ttl == b.default_kv_lease_ttl &&
         std::to_string(a.eviction_high_watermark_ratio) ==
             std::to_string(b.eviction_high_watermark_ratio) &&
         a.max_tenants == b.max_tenants &&
         a.enable_offload == b.enable_offload &&
         a.data_capabilities == b.data_capabilities &&
         a.write_capability_ttl_ms == b.write_capability_ttl_ms &&
         a.global_segment_size == b.global_segment_size &&
         a.engines == b.engines;
}

std::unique_ptr<CLI::App> MakeApp(Config* c) {
  auto app = std::make_unique<CLI::App>("fuzz_config");
  app->set_config("--config", "", "TOML/INI file");
  app->add_option("--rpc_address", c->rpc_address)->capture_default_str();
  app->add_option("--rpc_port", c->rpc_port)->capture_default_str();
  app->add_option("--metrics_port", c->metrics_port)->capture_default_str();
  app->add_option("--default_kv_lease_ttl", c->default_kv_lease_ttl)
      ->capture_default_str();
  app->add_option("--eviction_high_watermark_ratio",
                  c->eviction_high_watermark_ratio)
      ->capture_default_str();
  app->add_option("--max_tenants", c->max_tenants)->capture_default_str();
  app->add_flag("--enable_offload", c->enable_offload);
  app->add_option("--data_capabilities", c->data_capabilities)
      ->capture_default_str();
  app->add_option("--write_capability_ttl_ms", c->write_capability_ttl_ms)
      ->check(CLI::Range(int64_t{100}, int64_t{600000}))
      ->capture_default_str();
  kvpool::AddSizeFlag(*app, "--global_segment_size", &c->global_segment_size,
                      "DRAM contributed");
  app->add_option("--engine", c->engines, "engine specs");
  return app;
}

// Parses `path`; false when CLI11 refused the file (ParseError).
bool ParseFile(const std::string& path, Config* c) {
  auto app = MakeApp(c);
  std::string a0 = "fuzz_config", a1 = "--config", a2 = path;
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
  try {
    app->parse(3, argv);
    return true;
  } catch (const CLI::ParseError&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception: %s\n", e.what());
    Fail("config parsing threw something other than CLI::ParseError");
  } catch (...) {
    Fail("config parsing threw a non-std exception");
  }
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      "/dev/shm/kvpool-fuzz-config-" + std::to_string(getpid()) + ".toml";
  static const std::string again = path + ".again.toml";
  WriteFile(path, std::string(reinterpret_cast<const char*>(data), size));
  // Removed on every return: libFuzzer and the seed driver exit without
  // running destructors, and a file per run would pile up in /dev/shm.
  struct Unlink {
    ~Unlink() { ::unlink(path.c_str()); }
  } unlink_at_return;

  Config c;
  if (!ParseFile(path, &c)) return 0;
  // 2. Checks hold.
  if (c.write_capability_ttl_ms < 100 || c.write_capability_ttl_ms > 600000) {
    Fail("a ranged option outside its range");
  }
  auto back = kvpool::ParseSize(kvpool::FormatSize(c.global_segment_size));
  if (!back.ok() || back.value() != c.global_segment_size) {
    Fail("a size option that does not round trip");
  }
  // 3. Deterministic.
  Config c2;
  if (!ParseFile(path, &c2) || !SameValues(c, c2)) {
    Fail("parsing the same file twice gave different values");
  }
  return 0;
}
