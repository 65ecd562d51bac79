#pragma once
// F32 Conv and ConvTranspose over 1-D and 2-D spatial data on oneDNN (Debian's 2.6): Conv as
// convolution_forward, ConvTranspose as convolution_backward_data (ONNX's ConvTranspose weights
// [C, M/group, k...] are exactly that primitive's grouped [G, OC/G, IC/G, k...] weights), and the
// gradient rule's weight-gradient Conv as convolution_backward_weights (see dnnl_conv). oneDNN
// picks its blocked layouts (format_tag::any); the user's NCHW data and weights are reordered in and
// out. Plans (primitive descriptors, primitives, reorders) are cached by shape and attributes, so a
// training step creates them once. Forward convolutions also run on integers (u8 / s8 data, s8
// weights, s32 results, a run-time data zero point): integer_conv.hpp says when that is exact.
// Threads (dnnl_thread.hpp): each call runs on one OpenMP thread over a slice of the batch (of oc
// for backward_weights), and the device's parallel_for shares the slices out.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <new>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ipu/ops/kernels/dnnl_thread.hpp"
#include "ipu/ops/kernels/window.hpp"
#include "ipu/ops/nchwc_blocks.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// Which oneDNN primitive runs an op. Conv is `forward`; ConvTranspose is `backward_data` (its input
/// is the primitive's diff_dst); the weight-gradient Conv of the gradient rule (X^T by dY^T, batch
/// and channels swapped) is `backward_weights` of the convolution it differentiates.
enum class dnnl_conv_kind : std::uint8_t { forward, backward_data, backward_weights };

/// A convolution in oneDNN's terms: src [n, ic, ih, iw] -> dst [n, oc, oh, ow] by weights
/// [g, oc/g, ic/g, kh, kw], plus which primitive runs it.
struct dnnl_conv_shape {
  std::int64_t n = 0, ic = 0, oc = 0, group = 1, ih = 1, iw = 1, oh = 1, ow = 1, kh = 1, kw = 1;
  std::int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  bool bias = false;
  dnnl_conv_kind kind = dnnl_conv_kind::forward;
  /// Element types: F32 throughout, or an integer forward convolution's u8 / s8 src, s8 weights
  /// and s32 dst, with a zero point subtracted from src at run time when `src_zero_point`.
  dnnl::memory::data_type src_type = dnnl::memory::data_type::f32, weights_type = dnnl::memory::data_type::f32,
                          dst_type = dnnl::memory::data_type::f32;
  bool src_zero_point = false;
  /// 0: src and dst in NCHW; 8 or 16: both channel-blocked (oneDNN's nChw8c / nChw16c: [n,
  /// ceil(c / block), h, w, block], the last block's unused channels padding), as the nchwc-layout
  /// pass leaves them between consecutive convolutions (forward only).
  std::int64_t block = 0;
  /// With `block`: src in NCHW all the same (a stem of fewer channels than a block), dst blocked.
  bool plain_src = false;
  friend auto operator<=>(const dnnl_conv_shape&, const dnnl_conv_shape&) = default;
};

inline const dnnl::engine& dnnl_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// A per-thread, 64-byte aligned buffer of at least `bytes`, kept across calls: on this VM, first
/// touching freshly mapped pages cost ~100 ms for a 6 MB activation, 200x the reorder into it,
/// so no buffer is allocated per call. `Slot` keeps each role apart.
template <int Slot>
float* dnnl_buffer(std::size_t bytes) {
  struct buffer {
    void* data = nullptr;
    std::size_t size = 0;
    buffer() = default;
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    ~buffer() { std::free(data); }
  };
  thread_local buffer b;
  bytes = std::max<std::size_t>(bytes, 64);  // a zero-size scratchpad still gets a valid handle
  if (b.size < bytes) {
    const std::size_t size = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, size);
    if (!p) throw std::bad_alloc();
    std::free(b.data);
    b.data = p;
    b.size = size;
  }
  return static_cast<float*>(b.data);
}

/// A created convolution over one slice of the work. Its operands by role: `shared` is the same for
/// every slice (the weights; src for backward_weights), `in` and `out` are sliced (over the batch;
/// over oc for backward_weights). user_* are the op's layouts, the others oneDNN's choice.
struct dnnl_conv_plan {
  dnnl::memory::desc user_shared, user_in, user_out, shared, in, out, bias, scratch;
  int shared_arg = 0, in_arg = 0, out_arg = 0;
  dnnl::primitive conv;
  dnnl::reorder shared_reorder, in_reorder, out_reorder;  // empty when the layouts agree
};

/// The user layouts of the three operands of `s`: NCHW data, [O, I, kh, kw] weights. (The
/// backward_weights operands are permuted into these by plane copies: oneDNN's reorders from the
/// batch-swapped strides measured 50-100x slower than a copy.)
struct dnnl_user_layouts {
  dnnl::memory::desc src, weights, dst;
};
inline dnnl_user_layouts dnnl_user_layouts_of(const dnnl_conv_shape& s) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const memory::dims w_dims = s.group == 1 ? memory::dims{s.oc, s.ic, s.kh, s.kw}
                                           : memory::dims{s.group, s.oc / s.group, s.ic / s.group, s.kh, s.kw};
  const tag data = s.block == 16 ? tag::nChw16c : s.block == 8 ? tag::nChw8c : tag::nchw;
  return {memory::desc(memory::dims{s.n, s.ic, s.ih, s.iw}, s.src_type, s.plain_src ? tag::nchw : data),
          memory::desc(w_dims, s.weights_type, s.group == 1 ? tag::oihw : tag::goihw),
          memory::desc(memory::dims{s.n, s.oc, s.oh, s.ow}, s.dst_type, data)};
}

/// The plan for `s`, created on first use; null when oneDNN does not take the shape (then the
/// caller runs its own kernel). Thread-safe; plans live as long as the process.
inline std::shared_ptr<const dnnl_conv_plan> dnnl_conv_plan_for(const dnnl_conv_shape& s) {
  static std::mutex mutex;
  static std::map<dnnl_conv_shape, std::shared_ptr<const dnnl_conv_plan>> cache;
  const auto& key = s;
  // Held while creating, too: oneDNN's own primitive cache synchronises through code ThreadSanitizer
  // does not see, so concurrent creations would read as races. A plan is created once per shape.
  const std::lock_guard lock(mutex);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const auto user = dnnl_user_layouts_of(s);
  // Blocked data stays as it is: the layout is the point of it.
  const memory::desc any_src = s.block ? user.src : memory::desc(user.src.dims(), s.src_type, tag::any),
                     any_dst = s.block ? user.dst : memory::desc(user.dst.dims(), s.dst_type, tag::any),
                     any_w(user.weights.dims(), s.weights_type, tag::any), bias_md(memory::dims{s.oc}, f32, tag::x);
  const memory::dims strides{s.sh, s.sw}, dilations{s.dh - 1, s.dw - 1}, pad_l{s.pt, s.pl}, pad_r{s.pb, s.pr};
  std::shared_ptr<dnnl_conv_plan> plan;
  try {
    const dnnl_one_thread one;
    const auto& engine = dnnl_cpu_engine();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per call: safe from several threads
    if (s.src_zero_point) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    plan = std::make_shared<dnnl_conv_plan>();
    const auto algo = dnnl::algorithm::convolution_direct;  // never Winograd: same numerics as direct
    const dnnl::convolution_forward::desc training(dnnl::prop_kind::forward_training, algo, any_src, any_w, any_dst,
                                                   strides, dilations, pad_l, pad_r);
    if (s.kind == dnnl_conv_kind::forward) {
      const auto desc = s.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, any_src,
                                                                 any_w, bias_md, any_dst, strides, dilations, pad_l,
                                                                 pad_r)
                               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, any_src,
                                                                 any_w, any_dst, strides, dilations, pad_l, pad_r);
      const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
      // On blocked data the reference implementation is oneDNN's last resort (a 3-channel
      // stem: 300 ms an image); the caller's own kernel does better.
      if (s.block && std::string_view(pd.impl_info_str()).starts_with("ref")) return cache.emplace(key, nullptr).first->second;
      plan->shared = pd.weights_desc();
      plan->in = pd.src_desc();
      plan->out = pd.dst_desc();
      plan->scratch = pd.scratchpad_desc();
      plan->conv = dnnl::convolution_forward(pd);
      plan->user_shared = user.weights;
      plan->user_in = user.src;
      plan->user_out = user.dst;
      plan->shared_arg = DNNL_ARG_WEIGHTS;
      plan->in_arg = DNNL_ARG_SRC;
      plan->out_arg = DNNL_ARG_DST;
    } else if (s.kind == dnnl_conv_kind::backward_data) {
      const dnnl::convolution_forward::primitive_desc hint(training, engine);
      const dnnl::convolution_backward_data::desc desc(algo, any_src, any_w, any_dst, strides, dilations, pad_l,
                                                       pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, attr, engine, hint);
      plan->shared = pd.weights_desc();
      plan->in = pd.diff_dst_desc();
      plan->out = pd.diff_src_desc();
      plan->scratch = pd.scratchpad_desc();
      plan->conv = dnnl::convolution_backward_data(pd);
      plan->user_shared = user.weights;
      plan->user_in = user.dst;
      plan->user_out = user.src;
      plan->shared_arg = DNNL_ARG_WEIGHTS;
      plan->in_arg = DNNL_ARG_DIFF_DST;
      plan->out_arg = DNNL_ARG_DIFF_SRC;
    } else {
      const dnnl::convolution_forward::primitive_desc hint(training, engine);
      const dnnl::convolution_backward_weights::desc desc(algo, any_src, any_w, any_dst, strides, dilations, pad_l,
                                                          pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, engine, hint);
      plan->shared = pd.src_desc();
      plan->in = pd.diff_dst_desc();
      plan->out = pd.diff_weights_desc();
      plan->scratch = pd.scratchpad_desc();
      plan->conv = dnnl::convolution_backward_weights(pd);
      plan->user_shared = user.src;
      plan->user_in = user.dst;
      plan->user_out = user.weights;
      plan->shared_arg = DNNL_ARG_SRC;
      plan->in_arg = DNNL_ARG_DIFF_DST;
      plan->out_arg = DNNL_ARG_DIFF_WEIGHTS;
    }
    plan->bias = bias_md;
    if (plan->shared != plan->user_shared)
      plan->shared_reorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine, plan->user_shared, engine, plan->shared));
    if (plan->in != plan->user_in)
      plan->in_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, plan->user_in, engine, plan->in));
    if (plan->out != plan->user_out)
      plan->out_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, plan->out, engine, plan->user_out));
  } catch (const dnnl::error&) {
    plan.reset();  // unsupported here (e.g. a negative pad): remembered, and the caller's kernel runs
  }
  return cache.emplace(key, plan).first->second;
}

/// Copies `outer` x `inner` planes of `plane` floats from [outer, inner, plane] order to
/// [inner, outer, plane] order (from `src_outer` planes on, `outer` of `src_outer_total`, into
/// `dst_outer_total`-wide rows of the destination from `dst_outer_first` on).
inline void dnnl_swap_planes(const float* src, std::int64_t outer, std::int64_t inner, std::int64_t plane,
                             std::int64_t src_outer_first, std::int64_t dst_outer_first,
                             std::int64_t dst_outer_total, float* dst) {
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const float* from = src + ((src_outer_first + o) * inner + i) * plane;
      std::copy(from, from + plane, dst + (i * dst_outer_total + dst_outer_first + o) * plane);
    }
}

/// The shared operand of a plan in oneDNN's layout, kept in the op's cache (kernel_context::cache)
/// when it is a constant of the graph: a model's weights are reordered on its first run only (every
/// run reordered them before: 7 ms of ResNet-18's 142 at batch 4, one thread).
struct dnnl_prepared_operand {
  const void* source = nullptr;
  dnnl::memory::desc desc;
  dnnl::memory memory;  // owns its buffer
};

/// `shared` in `plan`'s layout from the op's cache (`ctx.cache`, which must be set), reordered
/// and kept there unless the cache already holds this source in this layout.
inline dnnl::memory dnnl_prepared_shared(const kernel_context& ctx, const dnnl_conv_plan& plan,
                                         dnnl::memory shared_user, const void* shared) {
  // Only this function writes a Conv's or ConvTranspose's cache, so the slot holds this type.
  const auto* kept = static_cast<const dnnl_prepared_operand*>(ctx.cache->prepared.get());
  if (kept && kept->source == shared && kept->desc == plan.shared) return kept->memory;
  const dnnl_one_thread one;
  dnnl::stream stream(dnnl_cpu_engine());
  auto prepared = std::make_shared<dnnl_prepared_operand>();
  prepared->source = shared;
  prepared->desc = plan.shared;
  prepared->memory = dnnl::memory(plan.shared, dnnl_cpu_engine());
  plan.shared_reorder.execute(stream, shared_user, prepared->memory);
  stream.wait();
  ctx.cache->prepared = prepared;
  return prepared->memory;
}

/// Runs `s` from the op's `in` (X; dY^T for backward_weights) and `shared` (W; X^T for
/// backward_weights) into the op's `out`, in slices the device's parallel_for shares out (one plan
/// per slice size): over the batch, or over oc for backward_weights. The bias is added by the
/// primitive (forward) or afterwards (backward_data). False, having written nothing, when oneDNN
/// does not take the shape. `shared_is_constant`: the shared operand is a constant of the graph
/// (kernel_context::input_is_constant), so its reordered form can be kept between runs. Operands
/// are of `s`'s element types (integer ones for forward only, the zero point `src_zero_point`).
/// `after_slice(first, count)`, when given, runs on the thread that computed units [first, first +
/// count) once they are in `out`.
inline bool dnnl_conv_run(const kernel_context& ctx, dnnl_conv_shape s, const void* in, const void* shared,
                          const float* bias, void* out, bool shared_is_constant, std::int32_t src_zero_point = 0,
                          const std::function<void(std::int64_t, std::int64_t)>& after_slice = {}) {
  const bool by_oc = s.kind == dnnl_conv_kind::backward_weights;
  const std::int64_t units = by_oc ? s.oc : s.n;
  s.bias = bias && s.kind == dnnl_conv_kind::forward;
  if (bias && by_oc) return false;
  const auto f32 = dnnl::memory::data_type::f32;
  if (s.kind != dnnl_conv_kind::forward && (s.src_type != f32 || s.weights_type != f32 || s.dst_type != f32))
    return false;
  s.src_zero_point = src_zero_point != 0;
  if (s.block && s.kind != dnnl_conv_kind::forward) return false;
  const auto in_bytes = static_cast<std::int64_t>(dnnl::memory::data_type_size(s.src_type));
  const auto out_bytes = static_cast<std::int64_t>(dnnl::memory::data_type_size(s.dst_type));
  // Elements of the op's sliced input and output per unit of the slicing (forward, backward_data).
  const std::int64_t in_plane = s.ih * s.iw, out_plane = s.oh * s.ow, k_plane = s.kh * s.kw;
  // Blocked data holds whole blocks of channels.
  auto padded = [&](std::int64_t channels) { return s.block ? nchwc_padded_channels(channels, s.block) : channels; };
  const std::int64_t in_unit =
      s.kind == dnnl_conv_kind::forward ? (s.plain_src ? s.ic : padded(s.ic)) * in_plane : s.oc * out_plane;
  const std::int64_t out_unit = s.kind == dnnl_conv_kind::forward ? padded(s.oc) * out_plane : s.ic * in_plane;
  auto sliced = [&](std::int64_t count) {
    dnnl_conv_shape t = s;
    (by_oc ? t.oc : t.n) = count;
    return t;
  };
  // The one-unit plan decides whether oneDNN takes the shape and the shared operand's layout.
  const auto unit_plan = dnnl_conv_plan_for(sliced(1));
  if (!unit_plan) return false;
  const auto& engine = dnnl_cpu_engine();
  if (by_oc) {  // X^T [ic, n, ...] -> src [n, ic, ...]
    float* src_nchw = dnnl_buffer<0>(static_cast<std::size_t>(s.n * s.ic * in_plane) * sizeof(float));
    dnnl_swap_planes(static_cast<const float*>(shared), s.ic, s.n, in_plane, 0, 0, s.ic, src_nchw);
    shared = src_nchw;
  }
  // The shared operand in oneDNN's layout once per call (once per plan if it is a constant), read
  // by every slice.
  dnnl::memory shared_user(unit_plan->user_shared, engine, const_cast<void*>(shared));
  dnnl::memory shared_mem = shared_user;
  if (unit_plan->shared_reorder) {
    if (shared_is_constant && ctx.cache) {
      shared_mem = dnnl_prepared_shared(ctx, *unit_plan, shared_user, shared);
    } else {
      const dnnl_one_thread one;
      shared_mem = dnnl::memory(unit_plan->shared, engine, dnnl_buffer<1>(unit_plan->shared.get_size()));
      dnnl::stream stream(engine);
      unit_plan->shared_reorder.execute(stream, shared_user, shared_mem);
      stream.wait();
    }
  }
  ctx.parallel_for(static_cast<std::size_t>(units), [&](std::size_t u0, std::size_t u1) {
    // Blocked data between convolutions takes its after_slice work one image at a time, while more
    // of it is in cache: the one-unit plan, and no plan made for the slice's size.
    const bool unit_steps = s.block && after_slice;
    std::int64_t step = unit_steps ? 1 : static_cast<std::int64_t>(u1 - u0);
    auto plan = unit_steps ? unit_plan : dnnl_conv_plan_for(sliced(step));
    if (!plan) {  // not expected (only the slice size differs); then one unit at a time
      plan = unit_plan;
      step = 1;
    }
    const dnnl_one_thread one;
    dnnl::stream stream(engine);
    dnnl::memory shared_slice = shared_mem;
    if (plan->shared != unit_plan->shared) {  // a slice size whose primitive wants another layout
      shared_slice = dnnl::memory(plan->shared, engine, dnnl_buffer<2>(plan->shared.get_size()));
      dnnl::reorder(shared_user, shared_slice).execute(stream, shared_user, shared_slice);
    }
    dnnl::memory scratch(plan->scratch, engine, dnnl_buffer<3>(plan->scratch.get_size()));
    // backward_weights: the slice's dY and dW in NCHW / OIHW.
    float* const in_buf = by_oc ? dnnl_buffer<4>(static_cast<std::size_t>(s.n * step * out_plane) * sizeof(float)) : nullptr;
    float* const out_buf = by_oc ? dnnl_buffer<5>(static_cast<std::size_t>(step * s.ic * k_plane) * sizeof(float)) : nullptr;
    std::int32_t zero_point = src_zero_point;
    const dnnl::memory zero_point_mem(dnnl::memory::desc({1}, dnnl::memory::data_type::s32, dnnl::memory::format_tag::x),
                                      engine, &zero_point);
    for (auto first = static_cast<std::int64_t>(u0); first < static_cast<std::int64_t>(u1); first += step) {
      const void* in_ptr = static_cast<const std::byte*>(in) + first * in_unit * in_bytes;
      void* out_ptr = static_cast<std::byte*>(out) + first * out_unit * out_bytes;
      if (by_oc) {  // dY^T [oc, n, ...] rows first.. -> diff_dst [n, step, ...]
        dnnl_swap_planes(static_cast<const float*>(in), step, s.n, out_plane, first, 0, step, in_buf);
        in_ptr = in_buf;
        out_ptr = out_buf;
      }
      dnnl::memory in_user(plan->user_in, engine, const_cast<void*>(in_ptr));
      dnnl::memory out_user(plan->user_out, engine, out_ptr);
      dnnl::memory in_mem = in_user, out_mem = out_user;
      if (plan->in_reorder) {
        in_mem = dnnl::memory(plan->in, engine, dnnl_buffer<6>(plan->in.get_size()));
        plan->in_reorder.execute(stream, in_user, in_mem);
      }
      if (plan->out_reorder) out_mem = dnnl::memory(plan->out, engine, dnnl_buffer<7>(plan->out.get_size()));
      std::unordered_map<int, dnnl::memory> args{{plan->shared_arg, shared_slice},
                                                 {plan->in_arg, in_mem},
                                                 {plan->out_arg, out_mem},
                                                 {DNNL_ARG_SCRATCHPAD, scratch}};
      if (s.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plan->bias, engine, const_cast<float*>(bias)));
      if (s.src_zero_point) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point_mem);
      plan->conv.execute(stream, args);
      if (plan->out_reorder) plan->out_reorder.execute(stream, out_mem, out_user);
      if (after_slice) {  // forward: the slice's images, while they are in cache
        stream.wait();
        after_slice(first, step);
      }
      if (by_oc) {  // diff_weights [step, ic, ...] -> the op's Y [ic, oc, ...] columns first..
        stream.wait();
        dnnl_swap_planes(out_buf, step, s.ic, k_plane, 0, first, s.oc, static_cast<float*>(out));
      }
    }
    stream.wait();
    if (bias && s.kind == dnnl_conv_kind::backward_data) {
      for (auto b = static_cast<std::int64_t>(u0); b < static_cast<std::int64_t>(u1); ++b)
        for (std::int64_t c = 0; c < s.ic; ++c) {
          float* p = static_cast<float*>(out) + b * out_unit + c * in_plane;
          for (std::int64_t i = 0; i < in_plane; ++i) p[i] += bias[c];
        }
    }
  });
  return true;
}

/// Runs the weight gradient `s` (kind backward_weights, s.n the batch) from X [n, ic, ...] and dY
/// [n, oc, ...], both NCHW, into dW [oc, ic/group, kh, kw] (OIHW), in slices of oc the device's
/// parallel_for shares out (one group; grouped, one call). A slice of dY is a strided view, which
/// the reorder into oneDNN's layout reads as it is; a slice of dW is contiguous. False, having
/// written nothing, when oneDNN does not take the shape.
inline bool dnnl_conv_weights_run(const kernel_context& ctx, const dnnl_conv_shape& s, const float* x, const float* dy,
                                  float* dw) {
  using dnnl::memory;
  const bool sliced = s.group == 1;
  auto slice_shape = [&](std::int64_t count) {
    dnnl_conv_shape t = s;
    t.oc = count;
    return t;
  };
  if (!dnnl_conv_plan_for(sliced ? slice_shape(1) : s)) return false;
  const auto& engine = dnnl_cpu_engine();
  const std::int64_t out_plane = s.oh * s.ow, w_unit = s.ic / s.group * s.kh * s.kw;
  ctx.parallel_for(sliced ? static_cast<std::size_t>(s.oc) : 1, [&](std::size_t u0, std::size_t u1) {
    const auto first = static_cast<std::int64_t>(u0);
    const auto count = sliced ? static_cast<std::int64_t>(u1 - u0) : s.oc;
    auto plan = dnnl_conv_plan_for(sliced ? slice_shape(count) : s);
    std::int64_t step = count;
    if (!plan) {  // not expected (only the slice size differs); then one oc at a time
      plan = dnnl_conv_plan_for(slice_shape(1));
      step = 1;
    }
    const dnnl_one_thread one;
    dnnl::stream stream(engine);
    memory src_user(plan->user_shared, engine, const_cast<float*>(x));
    memory src = src_user;
    if (plan->shared_reorder) {
      src = memory(plan->shared, engine, dnnl_buffer<1>(plan->shared.get_size()));
      plan->shared_reorder.execute(stream, src_user, src);
    }
    memory scratch(plan->scratch, engine, dnnl_buffer<3>(plan->scratch.get_size()));
    for (std::int64_t oc0 = first; oc0 < first + count; oc0 += step) {
      // dY[:, oc0 : oc0 + step] as a strided [n, step, oh, ow] view of the whole dY.
      const memory::desc dy_view(memory::dims{s.n, step, s.oh, s.ow}, memory::data_type::f32,
                                 memory::dims{s.oc * out_plane, out_plane, s.ow, 1});
      memory dy_user(dy_view, engine, const_cast<float*>(dy + oc0 * out_plane));
      memory diff_dst = dy_user;
      if (plan->in != dy_view) {
        diff_dst = memory(plan->in, engine, dnnl_buffer<6>(plan->in.get_size()));
        dnnl::reorder(dy_user, diff_dst).execute(stream, dy_user, diff_dst);
      }
      memory dw_user(plan->user_out, engine, dw + oc0 * w_unit);
      memory diff_w = plan->out_reorder ? memory(plan->out, engine, dnnl_buffer<7>(plan->out.get_size())) : dw_user;
      plan->conv.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_w},
                                  {DNNL_ARG_SCRATCHPAD, scratch}});
      if (plan->out_reorder) plan->out_reorder.execute(stream, diff_w, dw_user);
    }
    stream.wait();
  });
  return true;
}

/// The oneDNN shape of a 1-D or 2-D convolution with geometry `g` (3-D geometry with a unit
/// leading dimension); false for 3-D.
inline bool dnnl_conv_shape_of(const window_geometry& g, dnnl_conv_shape& s) {
  if (g.rank > 2 || g.in[0] != 1 || g.out[0] != 1 || g.kernel[0] != 1 || g.pad_begin[0] != 0 || g.pad_end[0] != 0)
    return false;
  s.ih = g.in[1];
  s.iw = g.in[2];
  s.oh = g.out[1];
  s.ow = g.out[2];
  s.kh = g.kernel[1];
  s.kw = g.kernel[2];
  s.sh = g.stride[1];
  s.sw = g.stride[2];
  s.dh = g.dilation[1];
  s.dw = g.dilation[2];
  s.pt = g.pad_begin[1];
  s.pl = g.pad_begin[2];
  s.pb = g.pad_end[1];
  s.pr = g.pad_end[2];
  return true;
}

}  // namespace ipu::detail::math_ops
