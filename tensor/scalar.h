// A number passed to tensor ops (fill value, clamp bound, scalar operand): an integer, a double or a bool,
// kept exactly as given so that int64 values beyond 2^53 survive.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace braid {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double };

  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v ? 1 : 0) {}  // NOLINT(google-explicit-constructor)
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Double), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                  // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}              // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Double; }
  bool is_integral() const { return kind_ != Kind::Double; }

  double to_double() const { return kind_ == Kind::Double ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Double ? static_cast<int64_t>(d_) : i_; }

  // The value converted to element type T (float conversions round as the element type does).
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return kind_ == Kind::Double ? d_ != 0.0 : i_ != 0;
    else if constexpr (is_complex_v<T>) return T(static_cast<typename T::value_type>(to_double()));
    else if constexpr (is_floating_v<T>) return T(static_cast<opmath_t<T>>(to_double()));
    else return kind_ == Kind::Double ? static_cast<T>(d_) : static_cast<T>(i_);
  }

  // The dtype a scalar operand takes in a binary op with a tensor of dtype `tensor_dtype`:
  // the tensor's dtype, except that a floating scalar with an integral/bool tensor gives float32 and an
  // integer scalar with a bool tensor gives int64 (PyTorch's wrapped-number rule).
  DType result_dtype_with(DType tensor_dtype) const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

inline DType Scalar::result_dtype_with(DType tensor_dtype) const {
  if (kind_ == Kind::Double && !braid::is_floating(tensor_dtype) && !braid::is_complex(tensor_dtype)) {
    return DType::Float32;
  }
  if (kind_ == Kind::Int && tensor_dtype == DType::Bool) return DType::Int64;
  return tensor_dtype;
}

}  // namespace braid
