#pragma once
// The IPU cost model: every function is constexpr and documented with its formula and the source of
// its parameters (here and in docs/cost-model.md).
//
//   timing.hpp         cycles <-> seconds, peak FLOP/s, ideal AMP cycles
//   bsp.hpp            exchange phases, global sync, BSP supersteps
//   transfer.hpp       IPU-Link copies (ladder topology), host streams, Streaming Memory
//   compute_cost.hpp   matmul / convolution plans over tiles (AMP geometry, operand exchange,
//                      partial-sum reduction), element-wise ops
//   pipeline_cost.hpp  pipeline bubble and pipelined cycles
#include "ipu/device/bsp.hpp"
#include "ipu/device/collective_cost.hpp"
#include "ipu/device/compute_cost.hpp"
#include "ipu/device/pipeline_cost.hpp"
#include "ipu/device/timing.hpp"
#include "ipu/device/transfer.hpp"
