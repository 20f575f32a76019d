// copy_, fill_, contiguous, clone, to(dtype), to(device), item: moving and converting elements.

#include "base/copy_bytes.h"
#include "tensor/cuda/device_api.h"
#include "tensor/cuda/kernels.h"
#include "tensor/dispatch.h"
#include "tensor/loop.h"
#include "tensor/tensor.h"

namespace braid {
namespace {

template <class Dst, class Src>
Dst convert(Src v) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return v;
  } else if constexpr (is_complex_v<Src>) {
    // complex -> complex keeps both parts; complex -> real keeps the real part, as torch's casts do.
    if constexpr (is_complex_v<Dst>) {
      using V = typename Dst::value_type;
      return Dst(static_cast<V>(v.real()), static_cast<V>(v.imag()));
    } else if constexpr (std::is_same_v<Dst, bool>) {
      return v != Src(0);
    } else {
      return convert<Dst>(v.real());
    }
  } else if constexpr (is_complex_v<Dst>) {
    return Dst(static_cast<typename Dst::value_type>(static_cast<opmath_t<Src>>(v)));
  } else if constexpr (std::is_same_v<Dst, bool>) {
    return static_cast<opmath_t<Src>>(v) != opmath_t<Src>(0);
  } else if constexpr (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>) {
    // float64 -> 16-bit rounds once through float; the double->float step is exact for every value
    // that is not already between two halves, so results match PyTorch's conversion.
    return Dst(static_cast<float>(static_cast<opmath_t<Src>>(v)));
  } else {
    return static_cast<Dst>(static_cast<opmath_t<Src>>(v));
  }
}

// CPU copy with conversion; dst and src already have the same (broadcast) shape view.
void copy_cpu(const Tensor& dst, const Tensor& src) {
  auto rows = detail::rows_for<2>(dst.shape(), {&dst, &src});
  dispatch_with_complex(dst.dtype(), "copy_", [&]<class D>() {
    dispatch_with_complex(src.dtype(), "copy_", [&]<class S>() {
      detail::for_each_row(rows, [](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
        if constexpr (std::is_same_v<D, S>) {
          if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
            copy_bytes(p[0], p[1], static_cast<size_t>(n) * sizeof(D));
            return;
          }
        }
        if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
          D* d = reinterpret_cast<D*>(p[0]);
          const S* x = reinterpret_cast<const S*>(p[1]);
          for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(x[i]);
          return;
        }
        char* d = p[0];
        const char* x = p[1];
        for (int64_t i = 0; i < n; ++i, d += s[0], x += s[1]) {
          *reinterpret_cast<D*>(d) = convert<D>(*reinterpret_cast<const S*>(x));
        }
      });
    });
  });
}

}  // namespace

const Tensor& Tensor::copy_(const Tensor& src) const {
  BRAID_CHECK_ARG(src.defined(), "copy_: source tensor is undefined");
  // src must broadcast to this shape (not the other way round).
  const Shape b = detail::broadcast_shapes(shape(), src.shape(), "copy_", this, &src);
  BRAID_CHECK_ARG(b == shape(), "copy_: source {} does not broadcast to destination {}", src.describe(),
                  describe());
  bump_version();
  if (numel() == 0) return *this;
  if (device().is_cpu() && src.device().is_cpu()) {
    copy_cpu(*this, src.expand(shape()));
    return *this;
  }
  if (device() == src.device()) {  // both on one CUDA device
    cuda::copy_strided(*this, src.expand(shape()));
    return *this;
  }
  // Across devices: make a dense copy of src on its own device in this dtype, move the bytes, then
  // scatter into this tensor's layout on its device.
  const Tensor dense = src.expand(shape()).to(dtype()).contiguous();
  if (is_contiguous()) {
    cuda::copy(data_ptr(), device(), dense.data_ptr(), dense.device(), nbytes());
    return *this;
  }
  const Tensor staged = Tensor::empty(shape(), TensorOptions(dtype(), device()));
  cuda::copy(staged.data_ptr(), device(), dense.data_ptr(), dense.device(), nbytes());
  return copy_(staged);
}

const Tensor& Tensor::fill_(Scalar value) const {
  bump_version();
  if (numel() == 0) return *this;
  if (is_cuda()) {
    cuda::fill(*this, value);
    return *this;
  }
  dispatch_with_complex(dtype(), "fill_", [&]<class T>() {
    const T v = value.to<T>();
    auto rows = detail::rows_for<1>(shape(), {this});
    detail::for_each_row(rows, [v](const std::array<char*, 1>& p, const std::array<int64_t, 1>& s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* d = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) d[i] = v;
      } else {
        char* d = p[0];
        for (int64_t i = 0; i < n; ++i, d += s[0]) *reinterpret_cast<T*>(d) = v;
      }
    });
  });
  return *this;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(shape(), TensorOptions(dtype(), device()));
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Tensor::empty(shape(), TensorOptions(target, device()));
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  if (target.is_cuda()) cuda::check_device(target, "to");
  Tensor out = Tensor::empty(shape(), TensorOptions(dtype(), target));
  out.copy_(*this);
  return out;
}

Scalar Tensor::item() const {
  BRAID_CHECK_ARG(numel() == 1, "item(): a Tensor with {} elements cannot be converted to Scalar (tensor {})",
                  numel(), describe());
  BRAID_CHECK_ARG(!is_complex(dtype()),
                  "item(): braid's Scalar holds no complex numbers; read the {} element with "
                  "view_as_real(t) or data<std::complex<...>>() (tensor {})",
                  dtype(), describe());
  const Tensor host = cpu();
  return dispatch(dtype(), "item", [&]<class T>() -> Scalar {
    const T v = *static_cast<const T*>(host.data_ptr());
    return Scalar(v);
  });
}

}  // namespace braid
