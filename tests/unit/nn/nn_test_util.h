// Helpers shared by the nn tests: writing values into parameters, reading values out, comparing them,
// and a scratch directory that removes itself.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

namespace braid::nn::testing {

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

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("braid_nn_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace braid::nn::testing
