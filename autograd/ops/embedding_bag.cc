// embedding_bag: sums, means or maxes of bags of embedding rows, with its own kernels (one pass over the
// indices, no [num_indices, D] intermediate).
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/op_helpers.h"
#include "tensor/cuda/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/reduce.h"
#include "tensor/ops/shape_ops.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

namespace braid::autograd {
namespace {

struct Bags {
  std::vector<int64_t> index;   // row of weight per input position
  std::vector<int64_t> start;   // first input position of each bag; start[B] = number of indices
};

Bags read_bags(const Tensor& weight, const Tensor& input, const Tensor& offsets) {
  BRAID_CHECK_ARG(weight.dim() == 2, "embedding_bag: weight must be 2-D, got {}", weight.describe());
  BRAID_CHECK_ARG(input.dim() == 1 && !is_floating(input.dtype()),
                  "embedding_bag: input has to be a 1D integer Tensor, but got {}", input.describe());
  BRAID_CHECK_ARG(offsets.dim() == 1 && !is_floating(offsets.dtype()),
                  "embedding_bag: offsets has to be a 1D integer Tensor, but got {}", offsets.describe());
  Bags b;
  b.index = to_vector<int64_t>(input);
  b.start = to_vector<int64_t>(offsets);
  const int64_t n = static_cast<int64_t>(b.index.size());
  BRAID_CHECK_ARG(b.start.empty() || b.start[0] == 0, "embedding_bag: offsets[0] has to be 0, i.e., the first sequence "
                  "in the mini-batch has to start from position 0. However, got {}", b.start.empty() ? 0 : b.start[0]);
  for (size_t i = 0; i < b.start.size(); ++i) {
    BRAID_CHECK_ARG(b.start[i] <= n && (i == 0 || b.start[i] >= b.start[i - 1]),
                    "embedding_bag: offsets must be non-decreasing and at most {} (got {} at {})", n, b.start[i], i);
  }
  b.start.push_back(n);
  const int64_t v = weight.size(0);
  for (int64_t idx : b.index) {
    BRAID_CHECK_ARG(idx >= 0 && idx < v, "embedding_bag: index {} is out of bounds for dimension 0 with size {}", idx, v);
  }
  return b;
}

// The sparse weight gradient: row i of the values is the gradient of input position i.
TensorList sparse_backward(const Bags& bags, EmbeddingBagMode mode, const Tensor& psw, const Tensor& w,
                           const Tensor& go, const Shape& shape) {
  const int64_t n = static_cast<int64_t>(bags.index.size()), dim = shape[1];
  Tensor values = Tensor::empty({n, dim}, go.dtype());
  Tensor gpsw = psw.defined() ? zeros({n}, go.dtype()) : Tensor();
  dispatch_floating(go.dtype(), "embedding_bag sparse backward", [&]<class T>() {
    using Acc = opmath_t<T>;
    const T* gp = go.data<T>();
    T* vp = values.data<T>();
    for (size_t b = 0; b + 1 < bags.start.size(); ++b) {
      const int64_t lo = bags.start[b], hi = bags.start[b + 1];
      const Acc div = mode == EmbeddingBagMode::Mean ? static_cast<Acc>(hi - lo) : Acc(1);
      for (int64_t i = lo; i < hi; ++i) {
        const Acc scale = (psw.defined() ? static_cast<Acc>(psw.data<T>()[i]) : Acc(1)) / div;
        for (int64_t d = 0; d < dim; ++d) vp[i * dim + d] = T(scale * static_cast<Acc>(gp[static_cast<int64_t>(b) * dim + d]));
        if (psw.defined()) {
          const T* wrow = w.data<T>() + bags.index[i] * dim;
          Acc dot = 0;
          for (int64_t d = 0; d < dim; ++d) dot += static_cast<Acc>(gp[static_cast<int64_t>(b) * dim + d]) * static_cast<Acc>(wrow[d]);
          gpsw.data<T>()[i] = T(dot);
        }
      }
    }
  });
  Tensor indices = from_vector(bags.index, {1, n});
  return {SparseTensor(indices, values, shape).to_tensor(), gpsw};
}

int mode_code(EmbeddingBagMode mode) {
  return mode == EmbeddingBagMode::Sum ? 0 : mode == EmbeddingBagMode::Mean ? 1 : 2;
}

// The bags on a CUDA weight: the same checks (on the host, which holds the bags), one kernel for the
// forward and one for the weight's dense gradient (tensor/cuda/kernels.h). The per-sample weights'
// gradient and the sparse gradient's values are per-position rows of the output gradient, so tensor ops
// build them on the device.
Tensor embedding_bag_cuda(const Tensor& weight, const Tensor& input, const Tensor& offsets, const Bags& bags,
                          EmbeddingBagMode mode, const Tensor& per_sample_weights, bool sparse) {
  BRAID_CHECK_ARG(input.device() == weight.device() && offsets.device() == weight.device(),
                  "embedding_bag(): Expected all tensors to be on the same device, but found weight {}, input {} "
                  "and offsets {}",
                  weight.describe(), input.describe(), offsets.describe());
  const Device device = weight.device();
  const int64_t n = static_cast<int64_t>(bags.index.size()), nbags = static_cast<int64_t>(bags.start.size()) - 1;
  const int64_t dim = weight.size(1);
  const Tensor w = weight.contiguous();
  const Tensor psw = per_sample_weights.defined() ? per_sample_weights.to(weight.dtype()).contiguous() : Tensor();
  const Tensor in64 = input.to(DType::Int64).contiguous();
  const Tensor off64 = offsets.to(DType::Int64).contiguous();
  Tensor out = Tensor::empty({nbags, dim}, TensorOptions(weight.dtype(), device));
  Tensor argmax = mode == EmbeddingBagMode::Max ? Tensor::empty({nbags, dim}, TensorOptions(DType::Int64, device))
                                                : Tensor();
  cuda::embedding_bag(out, argmax, w, in64, off64, psw, mode_code(mode));

  // Position i's bag, and its scale in the gradient (1/bag size for mean).
  std::vector<int64_t> bag_of(static_cast<size_t>(n));
  std::vector<double> scale(static_cast<size_t>(n), 1.0);
  for (size_t b = 0; b + 1 < bags.start.size(); ++b) {
    for (int64_t i = bags.start[b]; i < bags.start[b + 1]; ++i) {
      bag_of[static_cast<size_t>(i)] = static_cast<int64_t>(b);
      if (mode == EmbeddingBagMode::Mean) {
        scale[static_cast<size_t>(i)] = 1.0 / static_cast<double>(bags.start[b + 1] - bags.start[b]);
      }
    }
  }
  return detail::record(
      "EmbeddingBagBackward", {weight, per_sample_weights}, out,
      {SavedTensor(w, "EmbeddingBagBackward"), SavedTensor(psw, "EmbeddingBagBackward"),
       SavedTensor(argmax, "EmbeddingBagBackward")},
      [in64, off64, bag_of, scale, index = bags.index, mode, sparse, device, n, shape = weight.shape()](
          const TensorList& g, SavedTensors& s) {
        const Tensor go = g[0].contiguous();
        const Tensor& weights = s[1].unpack();  // the per-sample weights
        Tensor gpsw;
        Tensor rows;  // row i: the output gradient of position i's bag
        if (weights.defined() || sparse) rows = braid::index_select(go, 0, from_vector(bag_of, {n}, device));
        if (weights.defined()) {
          const Tensor weight_rows = braid::index_select(s[0].unpack(), 0, in64);
          gpsw = braid::sum(braid::mul(rows, weight_rows), {1});
        }
        if (sparse) {
          Tensor factor = from_vector(scale, {n, 1}, device).to(go.dtype());
          if (weights.defined()) factor = braid::mul(factor, weights.reshape({n, 1}));
          const Tensor values = braid::mul(rows, factor);
          const Tensor indices = from_vector(index, {1, n}, device);
          return TensorList{SparseTensor(indices, values, shape).to_tensor(), gpsw};
        }
        Tensor gw = zeros(shape, TensorOptions(go.dtype(), device));
        cuda::embedding_bag_backward(gw, go, s[2].unpack(), in64, off64, weights, mode_code(mode));
        return TensorList{gw, gpsw};
      });
}

}  // namespace

Tensor embedding_bag(const Tensor& weight, const Tensor& input, const Tensor& offsets, EmbeddingBagMode mode,
                     const Tensor& per_sample_weights, bool sparse) {
  const Bags bags = read_bags(weight, input, offsets);
  BRAID_CHECK_ARG(!sparse || mode != EmbeddingBagMode::Max,
                  "embedding_bag: sparse gradients are not supported with mode max");
  const bool has_psw = per_sample_weights.defined();
  BRAID_CHECK_ARG(!has_psw || mode == EmbeddingBagMode::Sum,
                  "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum'");
  BRAID_CHECK_ARG(!has_psw || (per_sample_weights.dim() == 1 && per_sample_weights.numel() == input.numel()),
                  "embedding_bag: expected per_sample_weights to be 1D with the same number of elements as input "
                  "({}), got {}", input.numel(), per_sample_weights.describe());
  if (weight.is_cuda()) return embedding_bag_cuda(weight, input, offsets, bags, mode, per_sample_weights, sparse);
  BRAID_CHECK_ARG(input.device().is_cpu() && offsets.device().is_cpu(),
                  "embedding_bag(): Expected all tensors to be on the same device, but found weight {}, input {} "
                  "and offsets {}",
                  weight.describe(), input.describe(), offsets.describe());
  const int64_t nbags = static_cast<int64_t>(bags.start.size()) - 1, dim = weight.size(1);
  const Tensor w = weight.contiguous();
  const Tensor psw = has_psw ? per_sample_weights.to(weight.dtype()).contiguous() : Tensor();
  Tensor out = zeros({nbags, dim}, weight.dtype());
  Tensor argmax = mode == EmbeddingBagMode::Max ? full({nbags, dim}, -1, DType::Int64) : Tensor();

  dispatch_floating(weight.dtype(), "embedding_bag", [&]<class T>() {
    using Acc = opmath_t<T>;
    const T* wp = w.data<T>();
    T* op = out.data<T>();
    std::vector<Acc> acc(static_cast<size_t>(dim));
    for (int64_t b = 0; b < nbags; ++b) {
      const int64_t lo = bags.start[b], hi = bags.start[b + 1];
      if (lo == hi) continue;  // an empty bag stays 0
      if (mode == EmbeddingBagMode::Max) {
        int64_t* am = argmax.data<int64_t>() + b * dim;
        for (int64_t d = 0; d < dim; ++d) {
          Acc best = 0;
          for (int64_t i = lo; i < hi; ++i) {
            const Acc x = static_cast<Acc>(wp[bags.index[i] * dim + d]);
            if (i == lo || x > best) {
              best = x;
              am[d] = bags.index[i];
            }
          }
          op[b * dim + d] = T(best);
        }
        continue;
      }
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t i = lo; i < hi; ++i) {
        const Acc scale = has_psw ? static_cast<Acc>(psw.data<T>()[i]) : Acc(1);
        const T* row = wp + bags.index[i] * dim;
        for (int64_t d = 0; d < dim; ++d) acc[d] += scale * static_cast<Acc>(row[d]);
      }
      const Acc div = mode == EmbeddingBagMode::Mean ? static_cast<Acc>(hi - lo) : Acc(1);
      for (int64_t d = 0; d < dim; ++d) op[b * dim + d] = T(acc[d] / div);
    }
  });

  return detail::record(
      "EmbeddingBagBackward", {weight, per_sample_weights}, out,
      {SavedTensor(w, "EmbeddingBagBackward"), SavedTensor(psw, "EmbeddingBagBackward"),
       SavedTensor(argmax, "EmbeddingBagBackward")},
      [bags, mode, has_psw, nbags, dim, sparse, shape = weight.shape()](const TensorList& g,
                                                                        SavedTensors& s) {
        const Tensor go = g[0].contiguous();
        if (sparse) return sparse_backward(bags, mode, has_psw ? s[1].unpack() : Tensor(), s[0].unpack(), go, shape);
        Tensor gw = zeros(shape, go.dtype());
        Tensor gpsw = has_psw ? zeros({static_cast<int64_t>(bags.index.size())}, go.dtype()) : Tensor();
        dispatch_floating(go.dtype(), "embedding_bag backward", [&]<class T>() {
          using Acc = opmath_t<T>;
          const T* gp = go.data<T>();
          T* gwp = gw.data<T>();
          for (int64_t b = 0; b < nbags; ++b) {
            const int64_t lo = bags.start[b], hi = bags.start[b + 1];
            if (lo == hi) continue;
            if (mode == EmbeddingBagMode::Max) {
              const int64_t* am = s[2].unpack().data<int64_t>() + b * dim;
              for (int64_t d = 0; d < dim; ++d) {
                T& cell = gwp[am[d] * dim + d];
                cell = T(static_cast<Acc>(cell) + static_cast<Acc>(gp[b * dim + d]));
              }
              continue;
            }
            const Acc div = mode == EmbeddingBagMode::Mean ? static_cast<Acc>(hi - lo) : Acc(1);
            for (int64_t i = lo; i < hi; ++i) {
              const Acc scale = (has_psw ? static_cast<Acc>(s[1].unpack().data<T>()[i]) : Acc(1)) / div;
              T* row = gwp + bags.index[i] * dim;
              for (int64_t d = 0; d < dim; ++d) row[d] = T(static_cast<Acc>(row[d]) + scale * static_cast<Acc>(gp[b * dim + d]));
              if (has_psw) {
                const T* wrow = s[0].unpack().data<T>() + bags.index[i] * dim;
                Acc dot = 0;
                for (int64_t d = 0; d < dim; ++d) dot += static_cast<Acc>(gp[b * dim + d]) * static_cast<Acc>(wrow[d]);
                gpsw.data<T>()[i] = T(dot);
              }
            }
          }
        });
        return TensorList{gw, gpsw};
      });
}

}  // namespace braid::autograd
