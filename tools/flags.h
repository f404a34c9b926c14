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
