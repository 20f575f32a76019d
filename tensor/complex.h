// Complex tensors seen as their parts, and back (torch.view_as_real / torch.view_as_complex), plus the
// parts themselves. The views share storage: writing through one changes the other.
#pragma once

#include "tensor/tensor.h"

namespace braid {

// A complex64/complex128 tensor of shape S as a float32/float64 tensor of shape S + [2] (real, imaginary).
Tensor view_as_real(const Tensor& t);
// A float32/float64 tensor of shape S + [2] whose last dim has stride 1 as a complex tensor of shape S.
Tensor view_as_complex(const Tensor& t);
// The real and imaginary parts as real views of a complex tensor (torch.real / torch.imag).
Tensor real(const Tensor& t);
Tensor imag(const Tensor& t);
// A complex tensor from two real tensors of one shape and dtype (torch.complex).
Tensor complex(const Tensor& real_part, const Tensor& imag_part);

}  // namespace braid
