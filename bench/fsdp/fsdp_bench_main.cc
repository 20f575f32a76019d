// fsdp_bench: one training step of an MLP stack under each FSDP strategy, and the memory the gathered
// parameters hold between forward and backward (the point of FULL_SHARD's resharding). The same as
// `braid bench fsdp`; the work is in bench/fsdp/fsdp_bench.cc.
//
//   mpirun -np 2 build/bench/fsdp_bench [backend=gloo] [layers=8] [width=1024] [steps=10]
//
// Prints, per strategy, the median step time (forward + backward + SGD) and the process's resident
// memory right after forward minus before it (VmRSS, rank 0), then a "RESULT fsdp ..." line.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/fsdp/fsdp_bench.h"

int main(int argc, char** argv) {
  braid::bench::FsdpBenchOptions o;
  if (argc > 1) o.backend = argv[1];
  if (argc > 2) o.layers = std::atoll(argv[2]);
  if (argc > 3) o.width = std::atoll(argv[3]);
  if (argc > 4) o.steps = std::atoi(argv[4]);
  braid::bench::run_fsdp_bench(o, [](const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  });
  return 0;
}
