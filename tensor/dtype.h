// Element types of braid tensors, their sizes and names, and the type-promotion rules of binary ops.
#pragma once

#include <fmt/format.h>

#include <array>
#include <complex>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor/half.h"

namespace braid {

// Complex dtypes come last: the CUDA kernels' dtype codes (tensor/cuda/launch.h) are the real ones' values.
enum class DType : uint8_t {
  Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64, Complex64, Complex128
};

// The real dtypes: what every elementwise kernel and reduction handles.
inline constexpr std::array<DType, 9> kRealDTypes = {DType::Bool,    DType::UInt8,    DType::Int8,
                                                    DType::Int32,   DType::Int64,    DType::Float16,
                                                    DType::BFloat16, DType::Float32, DType::Float64};
// complex64 (two float32: real, imaginary) and complex128 (two float64), laid out as std::complex.
inline constexpr std::array<DType, 2> kComplexDTypes = {DType::Complex64, DType::Complex128};
// How many dtypes there are: a DType's value is below this (decoders check wire bytes against it).
inline constexpr size_t kDTypeCount = kRealDTypes.size() + kComplexDTypes.size();

// Bytes per element.
size_t element_size(DType dtype);
// "float32", "int64", "bool", ... (PyTorch's names without the "torch." prefix).
std::string_view dtype_name(DType dtype);
// PyTorch's C++ scalar-type names ("Float", "Long", ...), which its type errors use; braid's messages
// quote them where users compare against PyTorch's wording.
std::string_view torch_type_name(DType dtype);
// Parses a name from dtype_name() (also "float", "double", "half", "long", "int"); nullopt if unknown.
std::optional<DType> dtype_from_name(std::string_view name);

// float16, bfloat16, float32, float64 (not the complex dtypes, as torch.is_floating_point).
bool is_floating(DType dtype);
bool is_complex(DType dtype);
// complex64 -> float32, complex128 -> float64 (torch's toRealValueType); others unchanged.
DType real_dtype(DType dtype);
// float32 (and the 16-bit floats) -> complex64, float64 -> complex128; complex unchanged. Throws for
// integral dtypes.
DType complex_dtype(DType dtype);
// Integer types; bool counts only when include_bool.
bool is_integral(DType dtype, bool include_bool);

// The result dtype of a binary op on tensors of dtypes a and b (PyTorch's promotion lattice:
// bool < integers < floating; among floats the wider wins; float16 with bfloat16 gives float32;
// uint8 with int8 gives int32 because braid has no int16; complex wins over everything, and complex64
// with float64 gives complex128).
DType promote_types(DType a, DType b);

// The C++ element type of each dtype, and back.
template <DType D> struct DTypeTraits;
template <> struct DTypeTraits<DType::Bool> { using type = bool; };
template <> struct DTypeTraits<DType::UInt8> { using type = uint8_t; };
template <> struct DTypeTraits<DType::Int8> { using type = int8_t; };
template <> struct DTypeTraits<DType::Int32> { using type = int32_t; };
template <> struct DTypeTraits<DType::Int64> { using type = int64_t; };
template <> struct DTypeTraits<DType::Float16> { using type = Half; };
template <> struct DTypeTraits<DType::BFloat16> { using type = BFloat16; };
template <> struct DTypeTraits<DType::Float32> { using type = float; };
template <> struct DTypeTraits<DType::Float64> { using type = double; };
template <> struct DTypeTraits<DType::Complex64> { using type = std::complex<float>; };
template <> struct DTypeTraits<DType::Complex128> { using type = std::complex<double>; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<Half>() { return DType::Float16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<std::complex<float>>() { return DType::Complex64; }
template <> constexpr DType dtype_of<std::complex<double>>() { return DType::Complex128; }

template <class T> struct IsComplex : std::false_type {};
template <class T> struct IsComplex<std::complex<T>> : std::true_type {};
template <class T> inline constexpr bool is_complex_v = IsComplex<T>::value;

// The type arithmetic on T is carried out in: float for the 16-bit floats, T otherwise.
template <class T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <class T> using opmath_t = typename OpMath<T>::type;

template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                      std::is_same_v<T, BFloat16>;

}  // namespace braid

template <>
struct fmt::formatter<braid::DType> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(braid::DType d, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(braid::dtype_name(d), ctx);
  }
};
