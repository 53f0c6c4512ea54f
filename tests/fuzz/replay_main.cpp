// replay_main.cpp — a main() for a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput once on
// every file in the directories (or files) given, so that the seed corpus and every input that ever
// crashed run as plain ctest tests in every build (tests/fuzz/corpus/<target>/, tests/fuzz/regressions/
// <target>/). Files whose name starts with '.' (.keep) are skipped. A broken property aborts and an
// escaping exception terminates the process, so ctest sees the failure; the file being run is printed
// first, so the output names the input at fault.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...\n  runs the fuzz target once on every file\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && !e.path().filename().string().starts_with(".")) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", p.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "%s: cannot read\n", f.c_str());
      return 2;
    }
    std::fprintf(stderr, "replay %s (%zu bytes)\n", f.c_str(), bytes.size());
    std::vector<uint8_t> copy(bytes.begin(), bytes.end());  // exactly `size` bytes, as libFuzzer passes
    LLVMFuzzerTestOneInput(copy.data(), copy.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
