#pragma once
// ONNX's own model checker and shape inference, with their exceptions turned into ipu errors.
// <sys/mman.h> defines MAP_TYPE, which ONNX's parser.h uses as an enumerator; shield it.
#pragma push_macro("MAP_TYPE")
#undef MAP_TYPE
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#pragma pop_macro("MAP_TYPE")

#include <exception>
#include <filesystem>
#include <string>
#include <unordered_map>

#include "ipu/error.hpp"
#include "ipu/onnx/proto.hpp"

namespace ipu::onnx {

/// Runs ONNX's checker on a whole model. Equivalent to onnx::checker::check_model, except that
/// external data is looked up in `model_dir` (the in-memory overload only knows the current
/// directory). `stage` says which import step ran it, for the message.
inline void check_model(const ::onnx::ModelProto& model, const std::filesystem::path& model_dir,
                        std::string_view stage = {}) {
  const std::string where = stage.empty() ? std::string("ONNX checker") : "ONNX checker, " + std::string(stage);
  try {
    if (!model.ir_version())
      throw error(error_category::onnx, "the model has no IR version, so it is not an ONNX model", where,
                  "the file may be truncated or not an ONNX model at all");
    if (model.ir_version() > ::onnx::IR_VERSION)
      throw error(error_category::onnx,
                  "the model's IR version " + std::to_string(model.ir_version()) + " is newer than the " +
                      std::to_string(static_cast<int>(::onnx::IR_VERSION)) + " this ONNX understands",
                  where, "export the model with an older ONNX (IR version <= 8, opset <= 17)");
    ::onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto& o : model.opset_import()) opsets[o.domain()] = static_cast<int>(o.version());
    if (model.ir_version() >= 3 && opsets.empty())
      throw error(error_category::onnx, "the model imports no opset", where, "add an opset_import for the ONNX domain");
    if (model.ir_version() < 3) {
      if (!opsets.empty())
        throw error(error_category::onnx, "a model with IR version < 3 cannot import opsets", where);
      opsets[""] = 1;
    }
    ctx.set_opset_imports(opsets);
    if (!model_dir.empty()) ctx.set_model_dir(model_dir.string());
    ::onnx::checker::LexicalScopeContext lex;
    ::onnx::checker::check_graph(model.graph(), ctx, lex);
    if (ctx.get_ir_version() >= 8) ::onnx::checker::check_model_local_functions(model, ctx, lex);
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {
    throw error(error_category::onnx, "the model is not valid ONNX: " + detail::single_line(e.what()), where,
                "fix or re-export the model; Python's onnx.checker.check_model gives the same verdict");
  }
}

/// Runs ONNX shape inference in its strictest mode: node-level inference errors are errors, input
/// and output types are checked, and shape data is propagated through Shape-like ops. Inferred
/// types land in the graphs' value_info.
inline void infer_shapes(::onnx::ModelProto& model, std::string_view stage = {}) {
  const std::string where =
      stage.empty() ? std::string("ONNX shape inference") : "ONNX shape inference, " + std::string(stage);
  try {
    const ::onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/true);
    std::unordered_map<std::string, ::onnx::TensorShapeProto> generated;
    ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(), options, &generated);
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {
    throw error(error_category::shape, "shape inference failed: " + detail::single_line(e.what()), where,
                "the model's shapes or types are inconsistent; check the input shapes you gave");
  }
}

}  // namespace ipu::onnx
