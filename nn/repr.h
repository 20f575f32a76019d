// Formatting helpers for extra_repr(): values printed the way Python prints them, so that to_string()
// reads like printing the torch module.
#pragma once

#include <fmt/format.h>

#include <string>

namespace braid::nn::detail {

// Python's repr of a float: fmt's shortest round-trip form, with ".0" added to integral values
// (1.0 -> "1.0", 0.5 -> "0.5", 1e-05 -> "1e-05").
inline std::string py_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': inf, nan
  return s;
}

inline const char* py_bool(bool v) { return v ? "True" : "False"; }

}  // namespace braid::nn::detail
