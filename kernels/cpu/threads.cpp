// threads.cpp — one thread count for our OpenMP kernels and OpenBLAS (its OpenMP build shares
// the same pool), and what OpenBLAS chose at load time.
#include <omp.h>

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

}  // namespace tapegrad::kernels
