// The random stream behind everything in runtime/data that must be identical on every trainer, every run
// and every platform: the sampler's per-epoch shuffles and the synthetic dataset's teacher and samples.
//
// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014) is
// written out here rather than taken from std:: or braid::Generator because its output must never
// change: the standard fixes mt19937_64's bits but not those of std::uniform_int_distribution or
// std::shuffle, and a change to the tensor library's generator would silently reshuffle every job's data
// (tests/unit/runtime/data_test.cc pins a permutation to catch exactly that). Everything below is integer
// arithmetic, or exact conversions of integers to floating point, so the bits are the same everywhere.
#pragma once

#include <cstdint>

namespace braid::runtime::data {

// SplitMix64's output function: a bijective mix of 64 bits.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  // One independent stream per (seed, stream): the pair is hashed so that nearby seeds (0, 1, 2, ...) and
  // streams do not give shifted copies of each other's sequences.
  explicit SplitMix64(uint64_t seed, uint64_t stream = 0) : state_(mix64(seed ^ mix64(stream + kGamma))) {}

  uint64_t next_u64() {
    state_ += kGamma;
    return mix64(state_);
  }

  // Uniform in [0, n) for n >= 1, exactly: draws above the largest multiple of n are rejected.
  uint64_t uniform_below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // [0, limit) holds a whole number of n-ranges
    uint64_t x = next_u64();
    while (x >= limit) x = next_u64();
    return x % n;
  }

  // Uniform in [0, 1) from the top 53 bits (the conversion is exact).
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in [-1, 1).
  double uniform_pm1() { return 2.0 * uniform01() - 1.0; }

 private:
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio, SplitMix64's increment
  uint64_t state_;
};

}  // namespace braid::runtime::data
