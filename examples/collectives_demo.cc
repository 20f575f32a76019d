// The collectives quick start of README.md, as a program: every rank joins the default group, sums a
// tensor across ranks, makes a subgroup of the even ranks and broadcasts within it, then checks both
// results against their closed forms. Run it under mpirun (the store comes from MPI) or with env://
// variables; the backend is the first argument (gloo by default, or mpi).
#include <cstdio>
#include <exception>
#include <string>

#include "collectives/registry/group_registry.h"
#include "tensor/factory.h"

int run(int argc, char** argv) {
  using namespace braid;
  using namespace braid::collectives;
  const std::string backend = argc > 1 ? argv[1] : "gloo";

  init_process_group(backend);
  const int rank = get_rank();
  const int size = get_world_size();

  // Every rank contributes rank + 1: the sum is size * (size + 1) / 2 in every element.
  Tensor t = full({4}, static_cast<double>(rank + 1));
  TensorList ts{t};
  default_group()->allreduce(ts)->wait();
  const double want_sum = size * (size + 1) / 2.0;
  bool ok = to_vector<float>(t) == std::vector<float>(4, static_cast<float>(want_sum));

  // Every rank calls new_group with the same list; only members communicate on it.
  std::vector<int> evens;
  for (int r = 0; r < size; r += 2) evens.push_back(r);
  auto group = new_group(evens);
  Tensor b = full({2}, rank % 2 == 0 ? static_cast<double>(rank) : -1.0);
  if (get_rank(group) >= 0) {
    broadcast(b, /*src=*/0, group);  // the group's first member is global rank 0
    ok = ok && to_vector<float>(b) == std::vector<float>{0, 0};
  }

  if (rank == 0) {
    std::printf("collectives_demo: %s, %d ranks: allreduce sum %.0f (expected %.0f), broadcast in %zu even ranks: %s\n",
                backend.c_str(), size, static_cast<double>(to_vector<float>(t)[0]), want_sum, evens.size(),
                ok ? "ok" : "MISMATCH");
  }
  // Rank 0 hosts the store (mpirun's bootstrap, or env://): it must not exit while another rank still
  // waits for a store reply (new_group's store barrier), so every rank meets here first, as torch
  // programs do with dist.barrier() before dist.destroy_process_group().
  barrier();
  destroy_process_group();
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectives_demo: %s\n", e.what());
    return 1;
  }
}
