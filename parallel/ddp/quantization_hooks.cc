// The quantization hooks (PyTorch's quantization_hooks.py), device-agnostic.
//
// PyTorch's hooks hard-code CUDA and chain their second allgather from the first one's callback. Here a
// rank quantizes with its own (scale, zero point), which it knows before any communication, so both
// allgathers are issued at once from the hook (keeping every rank's op order identical) and the
// dequantization runs when both complete. The arithmetic is torch's: MinMaxObserver's qparams for
// quint8 (quant_min 0, quant_max 255, affine), quantize = clamp(round(x / scale) + zero_point, 0, 255),
// dequantize = scale * (q - zero_point), all in float32.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "parallel/ddp/default_hooks.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"

namespace braid::parallel {

using collectives::ProcessGroup;
using collectives::TensorList;

namespace {

constexpr float kQuantMin = 0.0f;
constexpr float kQuantMax = 255.0f;

// Round to nearest, ties to even (torch.round), for float32 values with |v| < 2^22, with tensor ops only
// (braid's tensor library has no round op): adding 1.5 * 2^23 moves v into [2^23, 2^24), where float32's
// spacing is exactly 1, so storing the sum rounds v to an integer, ties to even; subtracting the
// constant again is exact. Quantized values are within [-2^8 - 1, 2^8 + 1]: |x| / scale <= 255 because
// scale >= (max(x, 0) - min(x, 0)) / 255.
constexpr double kRoundShift = 12582912.0;  // 1.5 * 2^23
Tensor round_half_even(const Tensor& v) { return sub(add(v, Scalar(kRoundShift)), Scalar(kRoundShift)); }

struct QParams {
  float scale;
  float zero_point;
};

// torch.quantization.MinMaxObserver(...).calculate_qparams() for quint8, per_tensor_affine.
QParams qparams(float min_val, float max_val) {
  const float min_neg = std::min(min_val, 0.0f);
  const float max_pos = std::max(max_val, 0.0f);
  float scale = (max_pos - min_neg) / (kQuantMax - kQuantMin);
  scale = std::max(scale, std::numeric_limits<float>::epsilon());
  // std::nearbyint rounds ties to even in the default rounding mode, as torch.round does.
  const float zero_point = kQuantMin - std::nearbyint(min_neg / scale);
  return {scale, std::clamp(zero_point, kQuantMin, kQuantMax)};
}

// `x` (float32) quantized to uint8 with `scale` and `zero_point` (tensors broadcasting against x).
Tensor quantize(const Tensor& x, const Tensor& scale, const Tensor& zero_point) {
  Tensor q = add(round_half_even(div(x, scale)), zero_point);
  clamp_(q, kQuantMin, kQuantMax);
  return q.to(DType::UInt8);
}

Tensor dequantize(const Tensor& q, const Tensor& scale, const Tensor& zero_point) {
  return mul(scale, sub(q.to(DType::Float32), zero_point));
}

// Completes with fn() when `a` and `b` have both completed, or with the first error.
template <class F>
Future<Tensor> when_both(const Future<TensorList>& a, const Future<TensorList>& b, F fn, std::string what) {
  Future<Tensor> out(std::move(what));
  a.add_callback([b, out, fn](const Future<TensorList>& fa) {
    if (auto err = fa.error()) {
      out.set_error(err);
      return;
    }
    b.add_callback([out, fn](const Future<TensorList>& fb) {
      if (auto err = fb.error()) {
        out.set_error(err);
        return;
      }
      try {
        out.set_value(fn());
      } catch (...) {
        out.set_error(std::current_exception());
      }
    });
  });
  return out;
}

// `n` tensors shaped like `t` for an allgather's output list.
TensorList gather_outputs(const Tensor& t, int n) {
  TensorList out;
  for (int r = 0; r < n; ++r) out.push_back(empty(t.shape(), TensorOptions(t.dtype(), t.device())));
  return out;
}

// The values `rows` ([channels, width] float32) quantized per row: returns (s_and_z [2, channels], q).
std::pair<Tensor, Tensor> quantize_rows(const Tensor& rows) {
  const std::vector<float> mins = to_vector<float>(amin(rows, {1}));
  const std::vector<float> maxs = to_vector<float>(amax(rows, {1}));
  const auto channels = static_cast<int64_t>(mins.size());
  std::vector<float> sz(static_cast<size_t>(2 * channels));
  for (size_t c = 0; c < mins.size(); ++c) {
    const QParams p = qparams(mins[c], maxs[c]);
    sz[c] = p.scale;
    sz[mins.size() + c] = p.zero_point;
  }
  const Tensor s_and_z = from_vector<float>(sz, {2, channels}).to(rows.device());
  const Tensor q = quantize(rows, s_and_z.select(0, 0).unsqueeze(1), s_and_z.select(0, 1).unsqueeze(1));
  return {s_and_z, q};
}

// Both hooks: the buffer, zero-padded to whole rows of `width` elements, quantized per row; the ranks
// allgather their (scale, zero point) rows and quantized rows; each rank dequantizes every rank's rows
// with that rank's parameters, sums in rank order (so every rank gets the same bits), divides by ws and
// writes the result into the buffer. Per tensor is one row of the buffer's length.
Future<Tensor> quantized_average(ProcessGroup& group, const GradBucket& bucket, int64_t width, const char* hook) {
  const Tensor buffer = bucket.buffer();
  BRAID_CHECK_ARG(!buffer.is_sparse() && buffer.dim() == 1 && is_floating(buffer.dtype()),
                  "{}: bucket {} must hold a flat dense floating-point buffer, got {}", hook, bucket.index(),
                  buffer.describe());
  const int ws = group.size();
  const int64_t n = buffer.numel();
  std::string what = fmt::format("{} of bucket {}", hook, bucket.index());
  if (n == 0) {  // nothing to observe; every rank skips alike (bucket layouts are equal across ranks)
    Future<Tensor> done(std::move(what));
    done.set_value(buffer);
    return done;
  }
  const int64_t channels = (n + width - 1) / width;
  const TensorOptions f32(DType::Float32, buffer.device());
  Tensor rows = buffer.to(DType::Float32);
  if (channels * width != n) {
    // PyTorch pads the same way; the zeros take part in the last row's min/max there too.
    rows = zeros({channels * width}, f32);
    rows.narrow(0, 0, n).copy_(buffer);
  }
  auto [s_and_z, q] = quantize_rows(rows.view({channels, width}));
  TensorList sz_in{s_and_z}, q_in{q};
  std::vector<TensorList> sz_out{gather_outputs(s_and_z, ws)}, q_out{gather_outputs(q, ws)};
  // Issued back to back from this thread: see the file comment.
  const auto sz_done = group.allgather(sz_out, sz_in)->get_future();
  const auto q_done = group.allgather(q_out, q_in)->get_future();
  const TensorList all_sz = sz_out[0], all_q = q_out[0];
  return when_both(
      sz_done, q_done,
      [buffer, all_sz, all_q, ws, n, channels, width, f32] {
        Tensor sum = zeros({channels, width}, f32);
        for (int r = 0; r < ws; ++r) {
          const Tensor& sz = all_sz[static_cast<size_t>(r)];
          sum.add_(dequantize(all_q[static_cast<size_t>(r)], sz.select(0, 0).unsqueeze(1), sz.select(0, 1).unsqueeze(1)));
        }
        buffer.copy_(div(sum.view({channels * width}).narrow(0, 0, n), Scalar(ws)));
        return buffer;
      },
      std::move(what));
}

}  // namespace

NamedCommHook quantize_per_tensor_hook(std::shared_ptr<ProcessGroup> group) {
  group = detail::checked_group(std::move(group), "quantize_per_tensor_hook");
  return {"quantize_per_tensor", [group](GradBucket& bucket) {
            return quantized_average(*group, bucket, std::max<int64_t>(bucket.buffer().numel(), 1),
                                     "quantize_per_tensor_hook");
          }};
}

NamedCommHook quantize_per_channel_hook(std::shared_ptr<ProcessGroup> group, int64_t bucket_size) {
  group = detail::checked_group(std::move(group), "quantize_per_channel_hook");
  BRAID_CHECK_ARG(bucket_size > 0, "quantize_per_channel_hook: bucket_size must be positive, got {}", bucket_size);
  return {"quantize_per_channel", [group, bucket_size](GradBucket& bucket) {
            return quantized_average(*group, bucket, bucket_size, "quantize_per_channel_hook");
          }};
}

}  // namespace braid::parallel
