#pragma once
// Models older than the oldest opset the normaliser reads (ai.onnx 1-6) are upgraded to it with
// ONNX's own version converter, whose adapters know every change between opsets (Add's `broadcast`
// and `consumed_inputs`, BatchNormalization's `is_test`, ...).
#pragma push_macro("MAP_TYPE")
#undef MAP_TYPE
#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>
#pragma pop_macro("MAP_TYPE")

#include <cstdint>
#include <exception>
#include <string>

#include "ipu/error.hpp"

namespace ipu::onnx {

/// Converts `model` in place from ai.onnx opset `from` to opset `to` with ONNX's version converter;
/// an ipu::error naming both opsets and the converter's reason if it cannot.
inline void upgrade_opset(::onnx::ModelProto& model, std::int64_t from, std::int64_t to) {
  const std::string where = "model graph '" + model.graph().name() + "'";
  const std::string fix = "re-export the model at ai.onnx opset " + std::to_string(to) +
                          " or later, or convert it with onnx.version_converter.convert_version first";
  try {
    ::onnx::ModelProto converted = ::onnx::version_conversion::ConvertVersion(model, static_cast<int>(to));
    model = std::move(converted);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (what.size() > 600) what = what.substr(0, 600) + "...";
    throw error(error_category::onnx,
                "ONNX's version converter could not upgrade the model from ai.onnx opset " + std::to_string(from) +
                    " to " + std::to_string(to) + ": " + what,
                where, fix);
  }
}

}  // namespace ipu::onnx
