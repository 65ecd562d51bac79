// The distributed tests' main: MPI around doctest. Every rank runs the same test cases, in the
// same order (they exchange data), under `mpirun -np 2` (tests/dist/CMakeLists.txt).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/dist/mpi.hpp"

int main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();
  ipu::dist::mpi_environment env(&argc, &argv);
  doctest::Context context(argc, argv);
  return context.run();
}
