// `braid bench dist-autograd`'s remote model (register_dist_autograd_bench_classes in
// dist_autograd_bench.h) and what its "trace" method returns: the owner's host name, then one timestamp
// (nanoseconds of steady_clock) per OwnerStamp of the last "forward_traced" call and its backward pass.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::bench::detail {

enum OwnerStamp : size_t {
  kForwardEntry,   // the forward method starts
  kForwardExit,    // it returns (linear done)
  kOutGrad,        // d out reaches the owner's graph (a pre-hook on out's node)
  kInputGrad,      // d x computed, about to go to its RecvRpcBackward and back to the caller
  kParamsReady,    // the earlier of d W and d b reaching its accumulator (a leaf hook, before accumulating)
  kParamsDone,     // the later of d W's and d b's accumulation in the context
  kNumOwnerStamps
};

// steady_clock now, in nanoseconds (CLOCK_MONOTONIC: comparable between processes of one host).
int64_t bench_clock_ns();

}  // namespace braid::bench::detail
