// Runs a fuzz target's LLVMFuzzerTestOneInput over files, without libFuzzer:
// the normal (GCC) build links each target with this driver, and ctest feeds
// it the target's checked-in corpus (fuzz/corpus/<target>/), so every seed
// and every regression input is re-checked against the target's invariants
// on each CI run. A violated invariant aborts, which fails the test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv)
    __attribute__((weak));

namespace {

int RunFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int inputs = 0, errors = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (!e.is_regular_file()) continue;
        errors += RunFile(e.path());
        ++inputs;
      }
    } else {
      errors += RunFile(arg);
      ++inputs;
    }
  }
  std::printf("%d input(s) checked\n", inputs);
  return errors == 0 && inputs > 0 ? 0 : 1;
}
