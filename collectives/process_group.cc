#include "collectives/process_group.h"

#include <fmt/format.h>

#include "base/check.h"

namespace braid::collectives {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op.kind) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  }
  return "UNKNOWN";
}

ProcessGroup::ProcessGroup(int rank, int size, std::string name) : rank_(rank), size_(size), name_(std::move(name)) {
  BRAID_CHECK_ARG(size > 0, "ProcessGroup '{}': size must be positive, got {}", name_, size);
  BRAID_CHECK_ARG(rank >= 0 && rank < size, "ProcessGroup '{}': rank {} is out of range for size {}", name_, rank,
                  size);
}

Tensor ProcessGroup::empty_shared(const Shape& shape, DType dtype, Device device) {
  return Tensor::empty(shape, TensorOptions(dtype, device));
}

std::string ProcessGroup::describe_op(const std::string& op, uint64_t seq) const {
  return fmt::format("{} #{} on group '{}' (rank {}/{}, {})", op, seq, name_, rank_, size_, backend_name());
}

void ProcessGroup::monitored_barrier(std::optional<Millis> /*timeout*/, bool /*wait_all_ranks*/) {
  BRAID_THROW(InvalidArgument, "monitored_barrier on group '{}' (rank {}/{}): not supported by the {} backend",
              name_, rank_, size_, backend_name());
}

}  // namespace braid::collectives
