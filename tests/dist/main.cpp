// main.cpp — the driver of the MPI test binary (tests/dist/): every rank runs the same Catch2 test case
// (ctest starts it under `mpirun -np 2 --oversubscribe`, one test case per ctest test). A rank that
// fails a check makes its process exit non-zero, which mpirun reports as the job's failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) { return Catch::Session().run(argc, argv); }
