// Its own process, without the tests' main: the library leaves OpenBLAS as the host application set
// it (threads, kernel core) through a whole model run, and only the explicit opt-in changes it.
#include <cblas.h>

#include <cstdio>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/cpu/blas_tuning.hpp"

namespace {
int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}
}  // namespace

int main() {
  // What a host application might have chosen for itself.
  openblas_set_num_threads(2);
  const std::string core_before = openblas_get_corename();

  // A 64x64 MatMul: large enough that the kernel goes to OpenBLAS's sgemm.
  ipu::builder b("untuned");
  auto x = b.add_input_tensor({ipu::data_type::F32, {64, 64}}, "x");
  auto w = b.add_initialized_input(ipu::make_constant<float>({64, 64}, std::vector<float>(64 * 64, 0.5f)), "w");
  b.add_output(b.matmul(x, w, "y"));
  ipu::cpu::device dev(std::move(b).build(), {.threads = 2, .registry = &ipu::default_op_registry()});
  const auto out = dev.run(std::vector<ipu::host_tensor>{
      ipu::host_tensor::from<float>({64, 64}, std::vector<float>(64 * 64, 1.0f))});
  check(out.size() == 1 && out[0].as<float>()[0] == 32.0f, "the MatMul computes 64 * 1 * 0.5 = 32");
  check(openblas_get_num_threads() == 2, "running a model leaves OpenBLAS's thread count alone");
  check(openblas_get_corename() == core_before, "running a model leaves OpenBLAS's kernel core alone");

  ipu::tune_openblas_for_host_device();
  check(openblas_get_num_threads() == 1, "the opt-in sets one OpenBLAS thread per GEMM");
  check(ipu::openblas_core_rank(openblas_get_corename()) >= ipu::openblas_core_rank(core_before),
        "the opt-in never picks weaker kernels than OpenBLAS chose");
  if (failures == 0) std::puts("OpenBLAS untouched until the opt-in: OK");
  return failures == 0 ? 0 : 1;
}
