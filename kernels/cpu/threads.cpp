// threads.cpp — one thread count for our OpenMP kernels and OpenBLAS (its OpenMP build shares
// the same pool), and what OpenBLAS chose at load time.
#include <link.h>
#include <omp.h>

#include <fstream>
#include <set>

#include "kernels/backend.h"

extern "C" {
char* openblas_get_corename(void);
int openblas_get_parallel(void);
void openblas_set_num_threads(int);
}

namespace tapegrad::kernels {

void set_num_threads(int n) {
  TG_CHECK(n >= 1, "set_num_threads: {} is not a thread count (at least 1)", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}
int num_threads() { return omp_get_max_threads(); }
const char* blas_core_name() { return openblas_get_corename(); }
int blas_parallel_model() { return openblas_get_parallel(); }

std::string blas_library_path() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("libopenblas") == std::string::npos) return 0;
        *static_cast<std::string*>(out) = name;
        return 1;
      },
      &path);
  return path;
}

std::string blas_advice() {
  static const std::set<std::string> generic = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                                "Katmai", "Coppermine", "Northwood", "Banias", "Barcelona"};
  const std::string core = openblas_get_corename();
  if (!generic.count(core)) return {};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  const char* better = flags.find(" avx512f ") != std::string::npos ? "SkylakeX"
                       : flags.find(" avx2 ") != std::string::npos  ? "Haswell"
                                                                    : nullptr;
  if (!better) return {};
  return fmt::format(
      "OpenBLAS chose its generic '{}' kernels on a CPU with {}; matmuls run several times slower. Set "
      "OPENBLAS_CORETYPE={} (scripts/blas_env.sh does) before starting the program.",
      core, better == std::string("SkylakeX") ? "AVX-512" : "AVX2", better);
}

}  // namespace tapegrad::kernels
