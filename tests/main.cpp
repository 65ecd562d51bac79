#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "ipu/cpu/blas_tuning.hpp"

int main(int argc, char** argv) {
  // As every program of the project does (tests/cpu/blas_untuned_main.cpp checks the library alone).
  ipu::tune_openblas_for_host_device();
  doctest::Context context(argc, argv);
  return context.run();
}
