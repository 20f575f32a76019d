#include "tensor/random.h"

#include <cmath>
#include <sstream>

#include "base/check.h"

namespace braid {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_.seed(seed);
  seed_ = seed;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_;
}

uint64_t Generator::next_u64() {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_();
}

void Generator::fill_uniform(double* out, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  // 53 random bits -> [0, 1): exact and never 1.0.
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

void Generator::fill_normal(double* out, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  // Box-Muller on pairs; u1 in (0, 1] so log(u1) is finite.
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = r * std::cos(2.0 * M_PI * u2);
    if (i + 1 < n) out[i + 1] = r * std::sin(2.0 * M_PI * u2);
  }
}

void Generator::fill_int(int64_t* out, int64_t n, int64_t low, int64_t high) {
  BRAID_CHECK_ARG(low < high, "random_ expects 'from' to be less than 'to', but got from={} >= to={}", low, high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  // Rejection sampling keeps the distribution exactly uniform.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % range + 1) % range;
  std::lock_guard<std::mutex> lock(mu_);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t x;
    do {
      x = engine_();
    } while (x > limit);
    out[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + x % range);
  }
}

Generator::State Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return State{engine_, seed_};
}

void Generator::set_state(const State& state) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = state.engine;
  seed_ = state.seed;
}

std::string Generator::save_state() const {
  const State state = get_state();
  std::ostringstream out;
  out << "mt19937_64 " << state.seed << ' ' << state.engine;
  return out.str();
}

void Generator::restore_state(std::string_view bytes) {
  std::istringstream in{std::string(bytes)};
  std::string tag;
  State state;
  in >> tag >> state.seed >> state.engine;
  const bool read = !in.fail();
  if (read && !in.eof()) in >> std::ws;  // at the end already, std::ws would set failbit
  BRAID_CHECK_ARG(tag == "mt19937_64" && read && in.eof(),
                  "Generator::restore_state: {} bytes are not a saved generator state", bytes.size());
  set_state(state);
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace braid
