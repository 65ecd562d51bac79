// NonMaxSuppression, RoiAlign and GridSample against the ONNX specification's examples and
// hand-computed values (a linear image makes bilinear samples easy to check: 4 y + x).
#include "ipu/ops/kernels/vision.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ipu/ops/infer.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_vision {

using namespace tk;

namespace {
// The specification's six boxes: two clusters of three overlapping unit boxes and a lone one.
host_tensor spec_boxes() {
  return f32({1, 6, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101});
}
host_tensor spec_scores() { return f32({1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}); }
tensor_info selected(std::int64_t n) { return info(data_type::S64, {n, 3}); }
}  // namespace

TEST_CASE("vision: NonMaxSuppression keeps the best box of each overlapping cluster, up to the limit") {
  auto y = run1("NonMaxSuppression", {spec_boxes(), spec_scores(), i64({1}, {3}), f32({1}, {0.5f}), f32({1}, {0.0f})},
                selected(3));
  CHECK(values<std::int64_t>(y) == std::vector<std::int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5});
  // A score threshold drops the lone box (0.3); a limit of 2 stops after two.
  CHECK(values<std::int64_t>(run1("NonMaxSuppression",
                                  {spec_boxes(), spec_scores(), i64({1}, {3}), f32({1}, {0.5f}), f32({1}, {0.4f})},
                                  selected(2))) == std::vector<std::int64_t>{0, 0, 3, 0, 0, 0});
  CHECK(values<std::int64_t>(run1("NonMaxSuppression", {spec_boxes(), spec_scores(), i64({}, {2}), f32({}, {0.5f})},
                                  selected(2))) == std::vector<std::int64_t>{0, 0, 3, 0, 0, 0});
  // Without max_output_boxes_per_class nothing is selected.
  CHECK(run1("NonMaxSuppression", {spec_boxes(), spec_scores()}, selected(0)).info().num_elements() == 0);
}

TEST_CASE("vision: NonMaxSuppression with centre boxes, no IoU threshold (any overlap suppresses) and NaN scores") {
  auto boxes = f32({1, 3, 4}, {0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 5, 5, 1, 1});
  auto scores = f32({1, 1, 3}, {0.7f, 0.8f, 0.1f});
  CHECK(values<std::int64_t>(run1("NonMaxSuppression", {boxes, scores, i64({1}, {10})}, selected(2),
                                  {attr("center_point_box", 1)})) == std::vector<std::int64_t>{0, 0, 1, 0, 0, 2});
  // Flipped corners are the same box; equal scores keep box order.
  auto flipped = f32({1, 2, 4}, {1, 1, 0, 0, 0, 0, 1, 1});
  auto equal = f32({1, 1, 2}, {0.5f, 0.5f});
  CHECK(values<std::int64_t>(run1("NonMaxSuppression", {flipped, equal, i64({1}, {5}), f32({1}, {0.99f})}, selected(1))) ==
        std::vector<std::int64_t>{0, 0, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(values<std::int64_t>(run1("NonMaxSuppression", {flipped, f32({1, 1, 2}, {nan, 0.1f}), i64({1}, {5})},
                                  selected(1))) == std::vector<std::int64_t>{0, 0, 1});
  // Two classes and two batches are listed batch by batch, class by class.
  auto two = f32({2, 1, 2}, {0.2f, 0.9f, 0.9f, 0.2f});
  auto b2 = f32({2, 2, 4}, {0, 0, 1, 1, 0, 5, 1, 6, 0, 0, 1, 1, 0, 5, 1, 6});
  CHECK(values<std::int64_t>(run1("NonMaxSuppression", {b2, two, i64({1}, {1})}, selected(2))) ==
        std::vector<std::int64_t>{0, 0, 1, 1, 0, 0});
}

TEST_CASE("vision: NonMaxSuppression refuses bad attributes, thresholds and declared shapes") {
  CHECK_THROWS_WITH_AS(run1("NonMaxSuppression", {spec_boxes(), spec_scores(), i64({1}, {3})}, selected(3),
                            {attr("center_point_box", 2)}),
                       doctest::Contains("center_point_box"), ipu::error);
  // A misspelt attribute is refused rather than ignored.
  CHECK_THROWS_WITH_AS(run1("NonMaxSuppression", {spec_boxes(), spec_scores(), i64({1}, {3})}, selected(3),
                            {attr("centre_point_box", 1)}),
                       doctest::Contains("attribute 'centre_point_box' is not one of NonMaxSuppression's"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("NonMaxSuppression", {spec_boxes(), spec_scores(), i64({1}, {3}), f32({1}, {1.5f})}, selected(3)),
                       doctest::Contains("iou_threshold"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("NonMaxSuppression", {spec_boxes(), spec_scores(), i64({1}, {3}), f32({1}, {0.5f})}, selected(2)),
                       doctest::Contains("re-run shape inference"), ipu::error);
  CHECK_THROWS_AS(run1("NonMaxSuppression", {spec_boxes(), f32({1, 1, 5}, {1, 1, 1, 1, 1}), i64({1}, {3})}, selected(3)),
                  ipu::error);
}

TEST_CASE("vision: RoiAlign averages bilinear samples; half_pixel shifts by half a pixel") {
  auto x = iota_f32({1, 1, 4, 4});  // value 4 y + x
  auto roi = f32({1, 4}, {0, 0, 2, 2});
  auto b = i64({1}, {0});
  // half_pixel: region [-0.5, 1.5)^2, 2 x 2 samples at 0 and 1: mean of 0, 1, 4, 5.
  CHECK(values<float>(run1("RoiAlign", {x, roi, b}, f32_info({1, 1, 1, 1}), {attr("sampling_ratio", 2)})) ==
        std::vector<float>{2.5f});
  // output_half_pixel: samples at 0.5 and 1.5: mean of 2.5, 3.5, 6.5, 7.5.
  CHECK(values<float>(run1("RoiAlign", {x, roi, b}, f32_info({1, 1, 1, 1}),
                           {attr("sampling_ratio", 2), attr("coordinate_transformation_mode", "output_half_pixel")})) ==
        std::vector<float>{5.0f});
  // Adaptive grid (one sample per 1 x 1 bin) lands on pixel centres; spatial_scale halves the box.
  CHECK(values<float>(run1("RoiAlign", {x, f32({1, 4}, {0, 0, 4, 4}), b}, f32_info({1, 1, 2, 2}),
                           {attr("output_height", 2), attr("output_width", 2), attr("spatial_scale", 0.5f)})) ==
        std::vector<float>{0, 1, 4, 5});
  // max: the largest weighted tap of any sample (at integer points, the pixel itself).
  CHECK(values<float>(run1("RoiAlign", {x, roi, b}, f32_info({1, 1, 1, 1}), {attr("sampling_ratio", 2), attr("mode", "max")})) ==
        std::vector<float>{5.0f});
  // Samples past the border clamp to the last pixel; past it by more than one contribute nothing.
  CHECK(values<float>(run1("RoiAlign", {x, f32({1, 4}, {3.5f, 3.5f, 4.5f, 4.5f}), b}, f32_info({1, 1, 1, 1}),
                           {attr("sampling_ratio", 1)})) == std::vector<float>{15.0f});
  CHECK(values<float>(run1("RoiAlign", {x, f32({1, 4}, {10, 10, 12, 12}), b}, f32_info({1, 1, 1, 1}))) ==
        std::vector<float>{0.0f});
}

TEST_CASE("vision: RoiAlign picks each region's image and refuses what it cannot sample") {
  std::vector<float> v(32);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  auto x = f32({2, 1, 4, 4}, v);
  auto rois = f32({2, 4}, {0, 0, 2, 2, 0, 0, 2, 2});
  CHECK(values<float>(run1("RoiAlign", {x, rois, i64({2}, {1, 0})}, f32_info({2, 1, 1, 1}), {attr("sampling_ratio", 2)})) ==
        std::vector<float>{18.5f, 2.5f});
  CHECK_THROWS_WITH_AS(run1("RoiAlign", {x, rois, i64({2}, {2, 0})}, f32_info({2, 1, 1, 1})),
                       doctest::Contains("batch index 2"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("RoiAlign", {x, rois, i64({2}, {0, 0})}, f32_info({2, 1, 1, 1}), {attr("mode", "median")}),
                       doctest::Contains("mode"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("RoiAlign", {x, rois, i64({2}, {0, 0})}, f32_info({2, 1, 1, 1}), {attr("aligned", 1)}),
                       doctest::Contains("attribute 'aligned'"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("RoiAlign", {x, f32({2, 4}, {0, 0, 1e30f, 2, 0, 0, 2, 2}), i64({2}, {0, 0})},
                            f32_info({2, 1, 1, 1})),
                       doctest::Contains("sampling grid"), ipu::error);
  CHECK_THROWS_AS(run1("RoiAlign", {x, rois, i64({2}, {0, 0})}, f32_info({2, 1, 2, 2})), ipu::error);
}

TEST_CASE("vision: GridSample bilinear, nearest and bicubic, with and without align_corners") {
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  auto grid = f32({1, 1, 4, 2}, {0, 0, -1, -1, 1, 1, 1, -1});  // (x, y) pairs
  CHECK(values<float>(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 4}), {attr("align_corners", 1)})) ==
        std::vector<float>{2.5f, 1, 4, 2});
  CHECK(values<float>(run1("GridSample", {x, f32({1, 1, 1, 2}, {0.2f, -0.2f})}, f32_info({1, 1, 1, 1}),
                           {attr("align_corners", 1), attr("mode", "nearest")})) == std::vector<float>{2});
  // Without align_corners -1 is the outer edge of the corner pixel: a quarter of it with zeros.
  CHECK(values<float>(run1("GridSample", {x, f32({1, 1, 1, 2}, {-1, -1})}, f32_info({1, 1, 1, 1}))) ==
        std::vector<float>{0.25f});
  // Bicubic (a = -0.75) at the centre: weights -3/32, 19/32, 19/32, -3/32 per axis.
  auto centre = f32({1, 1, 1, 2}, {0, 0});
  check_close(values<float>(run1("GridSample", {x, centre}, f32_info({1, 1, 1, 1}),
                                 {attr("align_corners", 1), attr("mode", "bicubic")})),
              {0.59375f * 0.59375f * 10});
  check_close(values<float>(run1("GridSample", {x, centre}, f32_info({1, 1, 1, 1}),
                                 {attr("align_corners", 1), attr("mode", "cubic"), attr("padding_mode", "border")})),
              {2.5f});
}

TEST_CASE("vision: GridSample padding modes outside the image, and one spatial axis") {
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  auto grid = f32({1, 1, 2, 2}, {-1, -1, 3, 0});  // the corner's edge; far right, mid height
  CHECK(values<float>(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 2}), {attr("padding_mode", "zeros")})) ==
        std::vector<float>{0.25f, 0});
  CHECK(values<float>(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 2}), {attr("padding_mode", "border")})) ==
        std::vector<float>{1, 3});
  // x = 3.5 reflects off 1.5 to -0.5, the left edge: half of column 0 and its reflection.
  CHECK(values<float>(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 2}), {attr("padding_mode", "reflection")})) ==
        std::vector<float>{1, 2});
  auto line = f32({1, 2, 3}, {0, 10, 20, 1, 2, 3});
  CHECK(values<float>(run1("GridSample", {line, f32({1, 2, 1}, {0, 0.5f})}, f32_info({1, 2, 2}), {attr("align_corners", 1)})) ==
        std::vector<float>{10, 15, 2, 2.5f});
  CHECK_THROWS_WITH_AS(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 2}), {attr("padding_mode", "wrap")}),
                       doctest::Contains("padding_mode"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 2}), {attr("align_corner", 1)}),
                       doctest::Contains("attribute 'align_corner'"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 2}), {attr("mode", "area")}),
                       doctest::Contains("mode"), ipu::error);
  CHECK_THROWS_AS(run1("GridSample", {x, f32({1, 1, 2, 3}, {0, 0, 0, 0, 0, 0})}, f32_info({1, 1, 1, 2})), ipu::error);
  // An empty batch samples nothing.
  CHECK(run1("GridSample", {f32({0, 1, 2, 2}, {}), f32({0, 1, 1, 2}, {})}, f32_info({0, 1, 1, 1})).info().num_elements() == 0);
}

TEST_CASE("vision: RoiAlign gives an empty region 0 however large its other side, without casting it") {
  auto x = iota_f32({1, 1, 4, 4});
  // Zero height, 1e30 wide: no samples (0 x 1e30), so 0 as ONNX Runtime, for avg and max alike.
  auto flat = f32({1, 4}, {0, 2, 1e30f, 2});
  CHECK(values<float>(run1("RoiAlign", {x, flat, i64({1}, {0})}, f32_info({1, 1, 1, 1}), {attr("sampling_ratio", 0)})) ==
        std::vector<float>{0.0f});
  CHECK(values<float>(run1("RoiAlign", {x, flat, i64({1}, {0})}, f32_info({1, 1, 1, 1}), {attr("mode", "max")})) ==
        std::vector<float>{0.0f});
  // Inverted (negative height) alike.
  CHECK(values<float>(run1("RoiAlign", {x, f32({1, 4}, {0, 3, 1e30f, 1}), i64({1}, {0})}, f32_info({1, 1, 1, 1}))) ==
        std::vector<float>{0.0f});
}

TEST_CASE("vision: RoiAlign bounds a region's samples rather than running out of memory") {
  auto x = iota_f32({1, 1, 4, 4});
  auto roi = f32({1, 4}, {0, 0, 2, 2});
  // 512 x 512 bins of 256 x 256 samples: 2^34 samples for one region, refused up front.
  CHECK_THROWS_WITH_AS(run1("RoiAlign", {x, roi, i64({1}, {0})}, f32_info({1, 1, 512, 512}),
                            {attr("output_height", 512), attr("output_width", 512), attr("sampling_ratio", 256)}),
                       doctest::Contains("smaller sampling_ratio"), ipu::error);
  // Within the budget a large grid per bin is fine: one bin of 300 x 300 samples of the linear
  // image over [0.5, 2.5)^2, whose mean is its centre's value, 4 * 1.5 + 1.5.
  check_close(values<float>(run1("RoiAlign", {x, f32({1, 4}, {1, 1, 3, 3}), i64({1}, {0})}, f32_info({1, 1, 1, 1}),
                                 {attr("sampling_ratio", 300)})),
              {7.5f});
  // No regions: nothing to sample, whatever the attributes ask.
  CHECK(run1("RoiAlign", {x, f32({0, 4}, {}), i64({0}, {})}, f32_info({0, 1, 512, 512}),
             {attr("output_height", 512), attr("output_width", 512), attr("sampling_ratio", 256)})
            .info()
            .num_elements() == 0);
}

TEST_CASE("vision: GridSample with no channels writes nothing, even over an empty image") {
  // X has an empty spatial axis; with C = 0 the output is empty, so nothing is clamped to [0, -1].
  for (const char* pad : {"zeros", "border", "reflection"})
    for (const char* mode : {"linear", "nearest", "cubic"})
      CHECK(run1("GridSample", {f32({1, 0, 0, 2}, {}), f32({1, 1, 2, 2}, {3, -4, 0.5f, 0})}, f32_info({1, 0, 1, 2}),
                 {attr("padding_mode", pad), attr("mode", mode)})
                .info()
                .num_elements() == 0);
}

TEST_CASE("vision: GridSample refuses more than 3 spatial axes, in the kernel and the shape rule") {
  // 4 spatial axes: 4^4 cubic taps a point; the reference raises, and so do we.
  auto x = f32({1, 1, 1, 1, 1, 1}, {1});
  auto grid = f32({1, 1, 1, 1, 1, 4}, {0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(run1("GridSample", {x, grid}, f32_info({1, 1, 1, 1, 1, 1})), doctest::Contains("spatial axes"),
                       ipu::error);
  ipu::op_node op{"GridSample", "", 20, "gs", {}, {}, {}, {}};
  const tensor_info xi = x.info(), gi = grid.info();
  const std::vector<ipu::infer_input> in{{&xi, nullptr}, {&gi, nullptr}};
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, in, 1), doctest::Contains("1 to 3"), ipu::error);
  // 3 spatial axes are fine.
  const tensor_info x3{data_type::F32, {1, 2, 3, 4, 5}}, g3{data_type::F32, {1, 6, 7, 8, 3}};
  const std::vector<ipu::infer_input> in3{{&x3, nullptr}, {&g3, nullptr}};
  CHECK(ipu::infer_outputs(op, in3, 1).at(0) == tensor_info{data_type::F32, {1, 2, 6, 7, 8}});
}

}  // namespace test_vision
