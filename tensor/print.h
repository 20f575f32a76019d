// Readable printing in PyTorch's style:
//   tensor([[1., 2.],
//           [3., 4.]], dtype=float64)
// Large tensors are summarised with "..." (more than 1000 elements: 3 items at each edge).
#pragma once

#include <ostream>
#include <string>

#include "tensor/tensor.h"

namespace braid {

std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace braid
