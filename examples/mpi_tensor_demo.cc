// mpi_tensor_demo: braid tensors on every rank, summed across ranks with a plain MPI_Allreduce.
//
//   mpirun -np 4 --oversubscribe build/examples/mpi_tensor_demo      (what `make run` does)
//
// What it shows, honestly: braid's tensor core (factories, views, copy_, dtype conversion, in-place add,
// sum, to_vector) and its logging with a rank/role stamp, next to raw MPI. It is not a training job and does not use braid's
// collectives layer; both arrive with later issues, and then `make run` launches the real job. The roles
// are labels only: rank 0 calls itself "master" and the others "trainer" to show how log lines carry them.
//
// Each rank builds a [2, 4, 4] float32 payload:
//   payload[0] = rank + 1 everywhere                      -> after SUM: W(W+1)/2 everywhere
//   payload[1] = transpose of arange(16) as a 4x4 matrix  -> after SUM: W * (4*j + i) at [i, j]
// All values are small integers, so float32 sums are exact whatever order MPI adds them in, and every
// element is checked against the closed form, and so are the two slice totals from braid::sum. Exits 1 on
// any mismatch.
#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "tensor/factory.h"
#include "tensor/ops/reduce.h"
#include "tensor/tensor.h"

namespace {

constexpr int64_t kN = 4;

// The payload a rank contributes, built from views of one storage so the buffer handed to MPI is contiguous.
braid::Tensor make_payload(int rank) {
  braid::Tensor payload = braid::empty({2, kN, kN}, braid::DType::Float32);
  // In-place ops on a view write straight into the payload.
  const braid::Tensor first = payload.select(0, 0);
  first.fill_(1);
  first.add_(rank);
  // arange is int64 (as in PyTorch); to() converts, t() is a strided view that copy_ lays out.
  const braid::Tensor grid = braid::arange(kN * kN).view({kN, kN}).to(braid::DType::Float32);
  payload.select(0, 1).copy_(grid.t());
  return payload;
}

// Elements of the summed payload that differ from the closed form, as "[k, i, j] got x, want y".
std::vector<std::string> check_sum(const braid::Tensor& summed, int world) {
  const std::vector<double> got = braid::to_vector<double>(summed);
  std::vector<std::string> wrong;
  for (int64_t k = 0; k < 2; ++k) {
    for (int64_t i = 0; i < kN; ++i) {
      for (int64_t j = 0; j < kN; ++j) {
        const double want = k == 0 ? world * (world + 1) / 2.0 : static_cast<double>(world * (kN * j + i));
        const double value = got[static_cast<size_t>((k * kN + i) * kN + j)];
        if (value != want) wrong.push_back(fmt::format("[{}, {}, {}] got {}, want {}", k, i, j, value, want));
      }
    }
  }
  // The same sums seen through braid's own reduction: the total of each [4, 4] slice.
  const std::vector<double> totals = braid::to_vector<double>(braid::sum(summed, {1, 2}));
  const double want_totals[2] = {kN * kN * world * (world + 1) / 2.0, world * (kN * kN * (kN * kN - 1) / 2.0)};
  for (size_t k = 0; k < 2; ++k) {
    if (totals[k] != want_totals[k]) {
      wrong.push_back(fmt::format("sum(payload[{}]) got {}, want {}", k, totals[k], want_totals[k]));
    }
  }
  return wrong;
}

int run(int rank, int world) {
  auto log = braid::logging::get("braid.demo");
  braid::logging::set_identity(rank, world, rank == 0 ? "master" : "trainer");
  log->info("demo role '{}' (a label for this demo; the runtime issue gives roles meaning)",
            rank == 0 ? "master" : "trainer");

  braid::Tensor payload = make_payload(rank);
  BRAID_ASSERT(payload.is_contiguous(), "the payload must be one contiguous buffer for MPI");
  log->info("built {} (payload[0] filled with {}, payload[1] = arange(16).view(4, 4).t())", payload.describe(),
            rank + 1);

  MPI_Allreduce(MPI_IN_PLACE, payload.data_ptr(), static_cast<int>(payload.numel()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);

  const std::vector<std::string> wrong = check_sum(payload, world);
  for (size_t i = 0; i < wrong.size() && i < 5; ++i) log->error("mismatch {}", wrong[i]);

  // Every rank learns the total, so all of them exit with the same status.
  long local = static_cast<long>(wrong.size());
  long total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (total == 0) {
      std::printf("mpi_tensor_demo: OK: %d rank(s) summed %s with MPI_Allreduce; all %lld elements and both "
                  "slice sums match the closed form (payload[0] = %d, payload[1] = %d * arange^T)\n",
                  world, payload.describe().c_str(), static_cast<long long>(payload.numel()),
                  world * (world + 1) / 2, world);
    } else {
      std::printf("mpi_tensor_demo: FAILED: %ld value(s) across all ranks differ from the closed form\n", total);
    }
    std::fflush(stdout);
  }
  return total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int code = 1;
  try {
    code = run(rank, world);
  } catch (const std::exception& e) {
    // One rank failing alone would leave the others blocked in MPI_Allreduce; abort the whole job.
    braid::logging::get("braid.demo")->critical("demo failed: {}", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
