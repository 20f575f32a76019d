// Readable printing in PyTorch's style:
//   tensor([[1., 2.],
//           [3., 4.]], dtype=float64)
// Large tensors are summarised with "..." (more than 1000 elements: 3 items at each edge). The dtype
// suffix is left out for float32, int64 and bool (PyTorch's defaults); CUDA tensors add device='cuda:N'.
//
// fmt::format("{}", t) prints t.describe() ("float32[2, 3] cpu"), not the values: it is meant for logs
// and error messages, where a large tensor's contents would be noise.
#pragma once

#include <fmt/format.h>

#include <ostream>
#include <string>

#include "tensor/tensor.h"

namespace braid {

std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace braid

template <>
struct fmt::formatter<braid::Tensor> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const braid::Tensor& t, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(t.describe(), ctx);
  }
};
