// Flag and config-file parsing shared by kvpool's binaries. Every knob is a
// --flag and a key of the same name in the file given by --config (TOML or
// INI, via CLI11).
#ifndef KVPOOL_TOOLS_FLAGS_H_
#define KVPOOL_TOOLS_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "common/size_parse.h"

namespace kvpool {

// A size flag that accepts "64MiB" style values.
inline CLI::Option* AddSizeFlag(CLI::App& app, const std::string& name,
                                uint64_t* target, const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [target, name](const std::string& v) {
            auto r = ParseSize(v);
            if (!r.ok()) throw CLI::ValidationError(name, r.status().message());
            *target = r.value();
          },
          help + " (bytes; KiB/MiB/GiB suffixes; default " +
              FormatSize(*target) + ")")
      ->type_name("SIZE");
}

// The flags of a process that calls the master as infrastructure (a node,
// a router): its cluster secret and TLS to the master. `Config` has fields
// cluster_secret_file, tls_ca_file, tls_cert_file and tls_key_file.
template <typename Config>
void AddMasterSecurityFlags(CLI::App& app, Config* c) {
  app.add_option("--cluster_secret_file", c->cluster_secret_file,
                 "file holding the cluster secret (mode 0600); empty = call "
                 "the master without a credential");
  app.add_option("--tls_ca_file", c->tls_ca_file,
                 "PEM CA of the master's certificate; set = TLS to the master");
  app.add_option("--tls_cert_file", c->tls_cert_file,
                 "PEM client certificate, for a master that requires one");
  app.add_option("--tls_key_file", c->tls_key_file,
                 "PEM key of --tls_cert_file");
}

// --etcd_endpoints / --cluster_id of a process that calls the master (a
// node, a router, the CLI): with standby masters (docs/ha.md) it finds the
// leader in etcd and follows it, instead of one fixed master address.
struct EtcdFlags {
  std::string endpoints;  // empty: --master_server_address as given
  std::string cluster_id = "kvpool";
};
inline void AddEtcdFlags(CLI::App& app, EtcdFlags* f) {
  app.add_option("--etcd_endpoints", f->endpoints,
                 "etcd endpoints (h1:2379;h2:2379) where the leading "
                 "kvpool-master is found; overrides the master address");
  app.add_option("--cluster_id", f->cluster_id, "the masters' cluster in etcd")
      ->capture_default_str();
}
// The master address to use: "etcd://<endpoints>/<cluster_id>" when
// endpoints are given (MasterClient reads the leader there), else `address`.
inline std::string MasterAddress(const EtcdFlags& f,
                                 const std::string& address) {
  if (f.endpoints.empty()) return address;
  return "etcd://" + f.endpoints + "/" + f.cluster_id;
}

// Writes the bound port to `path` (for scripts and tests): written to a
// temporary file and renamed, so a reader never sees a partial number.
inline void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  std::fprintf(f, "%d\n", port);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace kvpool

#endif  // KVPOOL_TOOLS_FLAGS_H_
