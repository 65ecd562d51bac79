#pragma once
// Everything, in one include. Components can also be included one by one (each header compiles
// on its own), which keeps compile times down for code that needs only part of the library.

// Core vocabulary
#include "ipu/byte_buffer.hpp"
#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/event_count.hpp"
#include "ipu/float8.hpp"
#include "ipu/half.hpp"
#include "ipu/log.hpp"
#include "ipu/options.hpp"
#include "ipu/options_file.hpp"
#include "ipu/ring_buffer.hpp"
#include "ipu/shape.hpp"
#include "ipu/tensor.hpp"
#include "ipu/tensor_info.hpp"
#include "ipu/thread_pool.hpp"

// Graph IR
#include "ipu/graph/builder.hpp"
#include "ipu/graph/concepts.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/graph/views.hpp"

// Ops: shape inference and host kernels
#include "ipu/ops/all.hpp"
#include "ipu/ops/infer.hpp"

// ONNX and NumPy files
#include "ipu/io/npy.hpp"
#include "ipu/onnx/export.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/tensor.hpp"

// Exact host execution
#include "ipu/cpu/device.hpp"

// Device model, cost model, device manager
#include "ipu/device/cost.hpp"
#include "ipu/device/device_manager.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/memory.hpp"
#include "ipu/device/tile_mapping.hpp"

// Execution strategies, planning and executors
#include "ipu/sched/data_flow.hpp"
#include "ipu/sched/executor.hpp"
#include "ipu/sched/step_io.hpp"
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"

// PopEF and the Model Runtime
#include "ipu/popef/cache.hpp"
#include "ipu/popef/compile.hpp"
#include "ipu/popef/model.hpp"
#include "ipu/popef/reader.hpp"
#include "ipu/popef/writer.hpp"
#include "ipu/runtime/inference_session.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/runtime/queue_manager.hpp"
#include "ipu/runtime/session.hpp"
