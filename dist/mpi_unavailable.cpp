// mpi_unavailable.cpp — mpi_world() in a build without MPI (TAPEGRAD_MPI=OFF or Open MPI not found).
#include "dist/communicator.h"

namespace tapegrad::dist {

std::shared_ptr<Communicator> mpi_world(const MpiOptions&) {
  throw Error(
      "distributed training needs MPI, and this build of tapegrad has none (install libopenmpi-dev and configure "
      "with -DTAPEGRAD_MPI=ON)");
}

}  // namespace tapegrad::dist
