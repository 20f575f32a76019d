// The strided loop under every CPU elementwise kernel: N operands of one (already broadcast) shape are
// walked together, innermost dimension last, and a row callback gets N pointers, N byte strides and a
// length. Dimensions of size 1 are dropped and adjacent dimensions that are contiguous in every operand
// are merged, so a contiguous tensor of any rank is a single row.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace braid::detail {

template <size_t N>
struct Rows {
  std::vector<int64_t> sizes;                      // coalesced, innermost last; empty = one element
  std::array<std::vector<int64_t>, N> strides;     // bytes, per operand, per coalesced dim
  std::array<char*, N> base;
};

// Strides of `t` (in elements) seen through broadcasting to `shape` (0 where broadcast).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// The broadcast of two shapes; throws naming `op` and both operands when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op, const Tensor* ta = nullptr,
                       const Tensor* tb = nullptr);

// Builds the loop for operands[i] viewed with element strides `strides[i]` over `shape`.
template <size_t N>
Rows<N> make_rows(const Shape& shape, const std::array<char*, N>& base,
                  const std::array<Shape, N>& elem_strides, const std::array<size_t, N>& elem_sizes) {
  Rows<N> r;
  r.base = base;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const bool merge = !r.sizes.empty() && [&] {
      for (size_t k = 0; k < N; ++k) {
        if (r.strides[k].back() != elem_strides[k][d] * static_cast<int64_t>(elem_sizes[k]) * shape[d]) return false;
      }
      return true;
    }();
    if (merge) {
      r.sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) r.strides[k].back() = elem_strides[k][d] * static_cast<int64_t>(elem_sizes[k]);
    } else {
      r.sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) r.strides[k].push_back(elem_strides[k][d] * static_cast<int64_t>(elem_sizes[k]));
    }
  }
  return r;
}

// Calls row(ptrs, inner_strides, n) for every innermost row. Does nothing for an empty shape (numel 0);
// a 0-dim shape is one row of length 1.
template <size_t N, class Row>
void for_each_row(const Rows<N>& r, Row&& row) {
  for (int64_t s : r.sizes) {
    if (s == 0) return;
  }
  std::array<int64_t, N> inner{};
  int64_t inner_n = 1;
  if (!r.sizes.empty()) {
    inner_n = r.sizes.back();
    for (size_t k = 0; k < N; ++k) inner[k] = r.strides[k].back();
  }
  const size_t outer_dims = r.sizes.empty() ? 0 : r.sizes.size() - 1;
  std::vector<int64_t> counter(outer_dims, 0);
  std::array<char*, N> ptrs = r.base;
  while (true) {
    row(ptrs, inner, inner_n);
    // Advance the outer counter, innermost outer dim first.
    size_t d = outer_dims;
    while (d > 0) {
      --d;
      ++counter[d];
      for (size_t k = 0; k < N; ++k) ptrs[k] += r.strides[k][d];
      if (counter[d] < r.sizes[d]) break;
      for (size_t k = 0; k < N; ++k) ptrs[k] -= r.strides[k][d] * r.sizes[d];
      counter[d] = 0;
      if (d == 0) return;
    }
    if (outer_dims == 0) return;
  }
}

// Convenience: iterate tensors that all have (or broadcast to) `shape`.
template <size_t N>
Rows<N> rows_for(const Shape& shape, const std::array<const Tensor*, N>& ts) {
  std::array<char*, N> base;
  std::array<Shape, N> strides;
  std::array<size_t, N> sizes;
  for (size_t k = 0; k < N; ++k) {
    base[k] = static_cast<char*>(ts[k]->data_ptr());
    strides[k] = broadcast_strides(*ts[k], shape);
    sizes[k] = ts[k]->element_size();
  }
  return make_rows<N>(shape, base, strides, sizes);
}

}  // namespace braid::detail
