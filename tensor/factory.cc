#include "tensor/factory.h"

#include <cmath>
#include <cstring>

#include "tensor/dispatch.h"

namespace braid {
namespace {

// Builds on the CPU, then moves to the requested device.
Tensor finish(const Tensor& host, Device device) { return device.is_cpu() ? host : host.to(device); }

Tensor from_doubles(const std::vector<double>& values, const Shape& shape, TensorOptions options) {
  Tensor host = Tensor::empty(shape, options.dtype);
  dispatch(options.dtype, "factory", [&]<class T>() {
    T* p = host.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = Scalar(values[i]).to<T>();
  });
  return finish(host, options.device);
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions options) { return Tensor::empty(shape, options); }

Tensor full(const Shape& shape, Scalar value, TensorOptions options) {
  Tensor t = Tensor::empty(shape, options);
  t.fill_(value);
  return t;
}

Tensor zeros(const Shape& shape, TensorOptions options) { return full(shape, 0, options); }
Tensor ones(const Shape& shape, TensorOptions options) { return full(shape, 1, options); }
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype(), t.device())); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.shape(), value, TensorOptions(t.dtype(), t.device())); }

Tensor scalar_tensor(Scalar value, TensorOptions options) { return full({}, value, options); }

Tensor arange(Scalar end, TensorOptions options) { return arange(0, end, 1, options); }

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions options) {
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  BRAID_CHECK_ARG(st != 0, "arange: step must be nonzero");
  BRAID_CHECK_ARG((st > 0 && e >= s) || (st < 0 && e <= s),
                  "arange: upper bound and larger bound inconsistent with step sign (start={}, end={}, step={})", s,
                  e, st);
  // An integral default dtype with floating arguments becomes float32, as torch.arange infers.
  DType dtype = options.dtype;
  if (dtype == DType::Int64 && (start.is_floating() || end.is_floating() || step.is_floating())) {
    dtype = DType::Float32;
  }
  auto n = static_cast<int64_t>(std::ceil((e - s) / st));
  if (start.is_integral() && end.is_integral() && step.is_integral()) {
    // Integral ranges are sized exactly, as PyTorch does: doubles lose the low bits beyond 2^53.
    const int64_t is = start.to_int(), ie = end.to_int(), ist = step.to_int();
    BRAID_CHECK_ARG((ist > 0 && ie >= is) || (ist < 0 && ie <= is),
                    "arange: upper bound and larger bound inconsistent with step sign (start={}, end={}, step={})",
                    is, ie, ist);
    const uint64_t span = ist > 0 ? static_cast<uint64_t>(ie) - static_cast<uint64_t>(is)
                                  : static_cast<uint64_t>(is) - static_cast<uint64_t>(ie);
    const uint64_t ustep = ist > 0 ? static_cast<uint64_t>(ist) : 0 - static_cast<uint64_t>(ist);
    n = static_cast<int64_t>(span / ustep + (span % ustep != 0 ? 1 : 0));
  }
  Tensor host = Tensor::empty({n}, dtype);
  dispatch(dtype, "arange", [&]<class T>() {
    T* p = host.data<T>();
    if (start.is_integral() && end.is_integral() && step.is_integral()) {
      for (int64_t i = 0; i < n; ++i) p[i] = Scalar(start.to_int() + i * step.to_int()).to<T>();
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = Scalar(s + static_cast<double>(i) * st).to<T>();
    }
  });
  return finish(host, options.device);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  if (m < 0) m = n;
  BRAID_CHECK_ARG(n >= 0, "eye: n must be greater or equal to 0, got {}", n);
  Tensor host = zeros({n, m}, options.dtype);
  dispatch(options.dtype, "eye", [&]<class T>() {
    T* p = host.data<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = Scalar(1).to<T>();
  });
  return finish(host, options.device);
}

Tensor rand(const Shape& shape, TensorOptions options, Generator* gen) {
  dispatch_floating(options.dtype, "rand", [&]<class T>() {});
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  (gen ? *gen : default_generator()).fill_uniform(v.data(), static_cast<int64_t>(v.size()));
  return from_doubles(v, shape, options);
}

Tensor randn(const Shape& shape, TensorOptions options, Generator* gen) {
  dispatch_floating(options.dtype, "randn", [&]<class T>() {});
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  (gen ? *gen : default_generator()).fill_normal(v.data(), static_cast<int64_t>(v.size()));
  return from_doubles(v, shape, options);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options, Generator* gen) {
  std::vector<int64_t> v(static_cast<size_t>(shape_numel(shape)));
  (gen ? *gen : default_generator()).fill_int(v.data(), static_cast<int64_t>(v.size()), low, high);
  return from_vector(v, shape, options.device).to(options.dtype);
}

Tensor randperm(int64_t n, Generator* gen) {
  BRAID_CHECK_ARG(n >= 0, "randperm: n must be non-negative, got {}", n);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  Generator& g = gen ? *gen : default_generator();
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    int64_t j = 0;
    g.fill_int(&j, 1, 0, i + 1);
    std::swap(v[i], v[j]);
  }
  return from_vector(v, {n});
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  Shape s = shape;
  if (s.empty() && values.size() != 1) s = {static_cast<int64_t>(values.size())};
  BRAID_CHECK_ARG(shape_numel(s) == static_cast<int64_t>(values.size()),
                  "from_vector: {} values do not fill shape {}", values.size(), shape_str(s));
  Tensor host = Tensor::empty(s, dtype_of<T>());
  T* p = host.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return finish(host, device);
}

template <class T>
std::vector<T> to_vector(const Tensor& t) {
  const Tensor host = t.cpu().to(dtype_of<T>()).contiguous();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}

#define BRAID_INSTANTIATE(T)                                                          \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, Device); \
  template std::vector<T> to_vector<T>(const Tensor&);
BRAID_INSTANTIATE(bool)
BRAID_INSTANTIATE(uint8_t)
BRAID_INSTANTIATE(int8_t)
BRAID_INSTANTIATE(int32_t)
BRAID_INSTANTIATE(int64_t)
BRAID_INSTANTIATE(Half)
BRAID_INSTANTIATE(BFloat16)
BRAID_INSTANTIATE(float)
BRAID_INSTANTIATE(double)
#undef BRAID_INSTANTIATE

Tensor bytes_tensor(std::string_view bytes) {
  return from_vector(std::vector<uint8_t>(bytes.begin(), bytes.end()), {static_cast<int64_t>(bytes.size())});
}

std::string tensor_bytes(const Tensor& t, std::string_view what) {
  BRAID_CHECK_ARG(t.defined() && t.dtype() == DType::UInt8 && t.dim() == 1, "{}: expected a 1-D uint8 tensor of bytes, got {}",
                  what, t.defined() ? t.describe() : std::string("an undefined tensor"));
  const Tensor c = t.cpu().contiguous();
  const auto* data = c.data<uint8_t>();
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(c.numel()));
}

}  // namespace braid
