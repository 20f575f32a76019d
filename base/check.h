// Checking macros. Each throws a braid error whose message starts with the failed condition's text and
// carries a formatted explanation; the _EQ/_LT forms print both values.
//
//   BRAID_CHECK_ARG(n >= 0, "narrow: length must be non-negative, got {}", n);   // -> InvalidArgument
//   BRAID_CHECK_EQ(a.dim(), 2, "mm: self must be a matrix");                     // -> InvalidArgument
//   BRAID_ASSERT(ptr != nullptr, "storage lost its data");                       // -> InternalError
#pragma once

#include <fmt/format.h>

#include <string>

#include "base/error.h"

namespace braid::detail {

template <class E>
[[noreturn]] void throw_with_location(const char* file, int line, const std::string& message) {
  // Internal errors keep file:line for the bug report; user-facing errors read cleanly without it.
  if constexpr (std::is_same_v<E, InternalError>) {
    throw E(message + " [" + file + ":" + std::to_string(line) + "]");
  } else {
    (void)file;
    (void)line;
    throw E(message);
  }
}

inline std::string format_or_empty() { return {}; }
template <class... Args>
std::string format_or_empty(fmt::format_string<Args...> f, Args&&... args) {
  return fmt::format(f, std::forward<Args>(args)...);
}

}  // namespace braid::detail

#define BRAID_THROW(ErrorType, ...) \
  ::braid::detail::throw_with_location<ErrorType>(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))

#define BRAID_CHECK_TYPED(ErrorType, cond, ...)                                                      \
  do {                                                                                               \
    if (!(cond)) [[unlikely]] {                                                                      \
      ::braid::detail::throw_with_location<ErrorType>(__FILE__, __LINE__,                            \
                                                      ::braid::detail::format_or_empty(__VA_ARGS__)); \
    }                                                                                                \
  } while (0)

#define BRAID_CHECK_ARG(cond, ...) BRAID_CHECK_TYPED(::braid::InvalidArgument, cond, __VA_ARGS__)
#define BRAID_ASSERT(cond, ...) \
  BRAID_CHECK_TYPED(::braid::InternalError, cond, "internal assertion '" #cond "' failed: " __VA_ARGS__)

#define BRAID_CHECK_BINARY(op, a, b, ...)                                                          \
  do {                                                                                             \
    const auto& braid_lhs_ = (a);                                                                  \
    const auto& braid_rhs_ = (b);                                                                  \
    if (!(braid_lhs_ op braid_rhs_)) [[unlikely]] {                                                \
      ::braid::detail::throw_with_location<::braid::InvalidArgument>(                              \
          __FILE__, __LINE__,                                                                      \
          ::braid::detail::format_or_empty(__VA_ARGS__) +                                          \
              ::fmt::format(" (expected {} " #op " {}, got {} vs {})", #a, #b, braid_lhs_, braid_rhs_)); \
    }                                                                                              \
  } while (0)

#define BRAID_CHECK_EQ(a, b, ...) BRAID_CHECK_BINARY(==, a, b, __VA_ARGS__)
#define BRAID_CHECK_NE(a, b, ...) BRAID_CHECK_BINARY(!=, a, b, __VA_ARGS__)
#define BRAID_CHECK_LT(a, b, ...) BRAID_CHECK_BINARY(<, a, b, __VA_ARGS__)
#define BRAID_CHECK_LE(a, b, ...) BRAID_CHECK_BINARY(<=, a, b, __VA_ARGS__)
#define BRAID_CHECK_GE(a, b, ...) BRAID_CHECK_BINARY(>=, a, b, __VA_ARGS__)
