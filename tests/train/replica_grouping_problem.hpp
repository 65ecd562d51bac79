#pragma once
// The replica-grouping example of poptorch-features.txt 4.4.3 (8 replicas, W split 4 ways over
// orthogonal groups, X 2 ways over consecutive input groups), shared by the training session's and
// the PopTorch wrapper's suites: the per-replica model and tests/train/numpy_replica_grouping.py's
// computation of the whole problem.
#include "ipu/builder/builder.hpp"
#include "ipu/io/npy.hpp"
#include "pytorch_reference.hpp"

namespace ipu_test {

struct replica_grouping_problem {
  /// One replica's model: Z = x W on a [12, 40] block of rows and a [40, 14] block of W's columns,
  /// outputs Z and loss = mean(Z^2). W starts at zero; the tests set each group's value.
  ipu::graph model;
  ipu::host_tensor x;        // [24, 40]: the whole problem's rows
  ipu::host_tensor w_init;   // [4, 40, 14]: one value per weight group
  ipu::host_tensor w_final;  // [4, 40, 14]: after 4 steps of SGD, lr 0.01
  ipu::host_tensor losses;   // [4] float64: each step's loss before its update
};

/// The problem, with numpy's run made once per test process.
inline replica_grouping_problem make_replica_grouping_problem() {
  const auto dir = pytorch_runs("numpy_replica_grouping.py") / "grouping";
  ipu::builder b("model_with_loss");
  const auto xi = b.add_input_tensor({ipu::data_type::F32, {12, 40}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{40, 14}, std::vector<float>(40 * 14, 0.0f)), "W");
  const auto z = b.matmul(xi, w, "Z");
  b.add_output(z);
  b.add_output(b.reduce_mean(b.mul(z, z), {0, 1}, false, "loss"));
  return {std::move(b).build(), ipu::io::read_npy(dir / "x.npy"), ipu::io::read_npy(dir / "w_init.npy"),
          ipu::io::read_npy(dir / "w_final.npy"), ipu::io::read_npy(dir / "losses.npy")};
}

}  // namespace ipu_test
