#include "tensor/complex.h"

#include "base/check.h"

namespace braid {

Tensor view_as_real(const Tensor& t) {
  BRAID_CHECK_ARG(t.defined(), "view_as_real: the tensor is undefined");
  BRAID_CHECK_ARG(is_complex(t.dtype()), "view_as_real is only supported for complex tensors (got {})",
                  t.describe());
  // One complex element is two real ones: every stride and the offset double, and the new last dim
  // steps over the parts.
  Shape sizes = t.shape();
  Shape strides = t.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return Tensor::from_storage(t.storage(), sizes, strides, t.storage_offset() * 2, real_dtype(t.dtype()));
}

Tensor view_as_complex(const Tensor& t) {
  BRAID_CHECK_ARG(t.defined(), "view_as_complex: the tensor is undefined");
  BRAID_CHECK_ARG(t.dtype() == DType::Float32 || t.dtype() == DType::Float64,
                  "view_as_complex is only supported for float and double tensors, but got a tensor of scalar "
                  "type: {} ({})",
                  torch_type_name(t.dtype()), t.describe());
  BRAID_CHECK_ARG(t.dim() > 0 && t.shape().back() == 2, "view_as_complex: Tensor must have a last dimension of size 2 ({})",
                  t.describe());
  BRAID_CHECK_ARG(t.strides().back() == 1, "view_as_complex: Tensor must have a last dimension with stride 1 ({})",
                  t.describe());
  Shape sizes(t.shape().begin(), t.shape().end() - 1);
  Shape strides(t.strides().begin(), t.strides().end() - 1);
  for (size_t i = 0; i < strides.size(); ++i) {
    BRAID_CHECK_ARG(strides[i] % 2 == 0 || sizes[i] <= 1,
                    "view_as_complex: Tensor must have a stride divisible by 2 for all but last dimension ({})",
                    t.describe());
    strides[i] /= 2;
  }
  BRAID_CHECK_ARG(t.storage_offset() % 2 == 0, "view_as_complex: Tensor must have a storage_offset divisible by 2 ({})",
                  t.describe());
  return Tensor::from_storage(t.storage(), sizes, strides, t.storage_offset() / 2, complex_dtype(t.dtype()));
}

Tensor real(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  return view_as_real(t).select(-1, 0);
}

Tensor imag(const Tensor& t) {
  BRAID_CHECK_ARG(is_complex(t.dtype()), "imag is not implemented for tensors with non-complex dtypes (got {})",
                  t.describe());
  return view_as_real(t).select(-1, 1);
}

Tensor complex(const Tensor& real_part, const Tensor& imag_part) {
  BRAID_CHECK_ARG(real_part.dtype() == imag_part.dtype() &&
                      (real_part.dtype() == DType::Float32 || real_part.dtype() == DType::Float64),
                  "complex: Expected both inputs to be Float or Double tensors of one dtype, got {} and {}",
                  real_part.describe(), imag_part.describe());
  BRAID_CHECK_ARG(real_part.shape() == imag_part.shape(), "complex: the parts differ in shape: {} and {}",
                  real_part.describe(), imag_part.describe());
  Shape sizes = real_part.shape();
  sizes.push_back(2);
  Tensor parts = Tensor::empty(sizes, TensorOptions(real_part.dtype(), real_part.device()));
  parts.select(-1, 0).copy_(real_part);
  parts.select(-1, 1).copy_(imag_part);
  return view_as_complex(parts);
}

}  // namespace braid
