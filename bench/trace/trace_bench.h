// `braid bench trace`: what the collectives' hang tooling costs per op, measured in one run on two ranks.
//
//   plain            a group with no flight recorder and no desync check (the baseline);
//   flight recorder  the same group with the recorder on (BRAID_TRACE_BUFFER_SIZE, default 2000 entries);
//   desync check     the same group with the fingerprint check on (BRAID_DEBUG=DETAIL): each collective
//                    first allgathers an 8-byte hash of (op, dtype, shape, root, reduce op);
// each timed as `iters` post-and-wait allreduces of `bytes` per round, the variants alternating within every
// round so that load on the machine hits them alike. The table gives each variant's best round in us/op,
// the ratio to plain and the median over rounds of (variant - plain) in the same round; then the recorder
// alone (scheduled + started + ended on one thread, no group), which is its cost on the issuing and running
// threads without the noise of a collective. The verdict compares the desync check with the 1 us/op budget
// that would let it be on by default (issue 32).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace braid::bench {

struct TraceBenchOptions {
  std::string backend = "gloo";
  int64_t bytes = 4;
  int iters = 2000;
  int warmup = 500;
  int rounds = 5;
  int64_t micro_iters = 2'000'000;
  std::string init_method;
  int timeout_s = 300;
};

// Runs the benchmark on both ranks; rank 0 passes its table to `print`.
void run_trace_bench(const TraceBenchOptions& options, const std::function<void(const std::string&)>& print);

}  // namespace braid::bench
