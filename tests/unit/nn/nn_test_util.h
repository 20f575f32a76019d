// Helpers shared by the nn tests: writing values into parameters, reading values out, comparing them,
// and a scratch directory that removes itself.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"
#include "tests/support/temp_dir.h"

namespace braid::nn::testing {

// Files as bytes: what the tests of the file formats cut, flip and write back.
using Bytes = std::vector<uint8_t>;

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Overwrites a parameter's values in place (under no-grad, as an optimizer would), keeping the handle.
inline void set_values(const Tensor& t, const std::vector<double>& values) {
  autograd::NoGradGuard no_grad;
  t.copy_(from_vector(values, t.shape()));
}

// Element by element within an absolute `tol`, naming the first elements that differ.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(tol));
  }
}

// Row-major values; a sparse tensor is densified first.
inline std::vector<double> values_of(const Tensor& t) {
  return to_vector<double>(t.is_sparse() ? as_sparse(t).to_dense() : t);
}

using braid::testing::TempDir;

}  // namespace braid::nn::testing
