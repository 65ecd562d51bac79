#pragma once
// Everything, in one include, in the order of the data path. Components can also be included one
// by one (each header compiles on its own), which keeps compile times down for code that needs only
// part of the library; README.md's Layout table says which folder does what.

// Core vocabulary
#include "ipu/byte_buffer.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/event_count.hpp"
#include "ipu/float8.hpp"
#include "ipu/format.hpp"
#include "ipu/half.hpp"
#include "ipu/host_cpu.hpp"
#include "ipu/log.hpp"
#include "ipu/ring_buffer.hpp"
#include "ipu/shape.hpp"
#include "ipu/tensor.hpp"
#include "ipu/tensor_info.hpp"
#include "ipu/utf8.hpp"

// NumPy files
#include "ipu/io/npy.hpp"
#include "ipu/io/npy_rows.hpp"

// Graph IR
#include "ipu/graph/concepts.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/graph/views.hpp"

// Device model and cost model
#include "ipu/device/cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/memory.hpp"
#include "ipu/device/tile_mapping.hpp"

// Ops: shape inference and host kernels
#include "ipu/ops/all.hpp"
#include "ipu/ops/gradient_rules.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/ops/op_cost.hpp"
#include "ipu/ops/op_table.hpp"

// Graph optimisation passes
#include "ipu/passes/dead_code.hpp"
#include "ipu/passes/fold_batch_normalization.hpp"
#include "ipu/passes/fold_constants.hpp"
#include "ipu/passes/fuse_layer_normalization.hpp"
#include "ipu/passes/optimize.hpp"
#include "ipu/passes/rewrite.hpp"

// Building graphs in C++
#include "ipu/builder/builder.hpp"

// Exact host execution
#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/cpu/thread_pool.hpp"
#include "ipu/train/autodiff.hpp"
#include "ipu/train/loss.hpp"
#include "ipu/train/optimizer.hpp"
#include "ipu/train/recurrent.hpp"
#include "ipu/train/replication.hpp"
#include "ipu/train/session.hpp"
#include "ipu/train/training_graph.hpp"
#include "ipu/train/training_placement.hpp"

// ONNX files
#include "ipu/onnx/export.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/specializing_runner.hpp"
#include "ipu/onnx/tensor.hpp"

// PopTorch's options
#include "ipu/poptorch/model.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/poptorch/options_file.hpp"

// Execution strategies and planning
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"
#include "ipu/sched/training_plan.hpp"

// Running a plan on the host
#include "ipu/exec/data_flow.hpp"
#include "ipu/exec/executor.hpp"
#include "ipu/exec/stage_pool.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/exec/training_executor.hpp"

// PopEF files
#include "ipu/popef/model.hpp"
#include "ipu/popef/reader.hpp"
#include "ipu/popef/writer.hpp"

// Compiling to an executable, and the executable cache
#include "ipu/compile/cache.hpp"
#include "ipu/compile/compile.hpp"

// The Model Runtime: devices, sessions, queues, runners
#include "ipu/runtime/device_manager.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/runtime/queue_manager.hpp"
#include "ipu/runtime/session.hpp"

// PopART-style sessions
#include "ipu/popart/inference_session.hpp"
#include "ipu/popart/training_session.hpp"
