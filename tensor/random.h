// Seedable random generators. A Generator is a 64-bit Mersenne Twister with its own lock; the process has
// one default generator that manual_seed() reseeds. Sequences are deterministic for a given seed and order
// of calls, independent of thread timing when one thread draws.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

namespace braid {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) : engine_(seed), seed_(seed) {}

  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  // Raw 64-bit draws; callers hold no lock across calls (each call locks).
  uint64_t next_u64();
  // Fills `n` doubles: uniform in [0,1), or standard normal.
  void fill_uniform(double* out, int64_t n);
  void fill_normal(double* out, int64_t n);
  // n integers uniform in [low, high).
  void fill_int(int64_t* out, int64_t n, int64_t low, int64_t high);

  // The whole state, to replay a sequence of draws (torch.get_rng_state / set_rng_state): activation
  // checkpointing restores it before recomputing, so recomputed dropout masks equal the forward's.
  struct State {
    std::mt19937_64 engine;
    uint64_t seed = 0;
  };
  State get_state() const;
  void set_state(const State& state);
  // The state as bytes, for a checkpoint: the engine's words and the seed as text (what the standard's
  // stream operators write), so that it is the same on every platform. restore_state() throws
  // InvalidArgument for bytes that are not such a state, and then leaves the generator as it was.
  std::string save_state() const;
  void restore_state(std::string_view bytes);

 private:
  mutable std::mutex mu_;
  std::mt19937_64 engine_;  // GUARDED_BY(mu_)
  uint64_t seed_;           // GUARDED_BY(mu_)
};

Generator& default_generator();
// Reseeds the default generator.
void manual_seed(uint64_t seed);

}  // namespace braid
