// Reduction operators of the collectives, as torch.distributed.ReduceOp.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace braid::collectives {

struct ReduceOp {
  enum Kind : uint8_t { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };

  Kind kind = SUM;
  double premul_factor = 1.0;  // PREMUL_SUM: every input is multiplied by this before summing

  constexpr ReduceOp() = default;
  constexpr ReduceOp(Kind k) : kind(k) {}  // NOLINT(google-explicit-constructor)
  static constexpr ReduceOp premul_sum(double factor) {
    ReduceOp op(PREMUL_SUM);
    op.premul_factor = factor;
    return op;
  }
  bool is_bitwise() const { return kind == BAND || kind == BOR || kind == BXOR; }
  friend bool operator==(const ReduceOp& a, const ReduceOp& b) { return a.kind == b.kind; }
};

std::string_view reduce_op_name(ReduceOp op);

}  // namespace braid::collectives

template <>
struct fmt::formatter<braid::collectives::ReduceOp> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(braid::collectives::ReduceOp op, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(braid::collectives::reduce_op_name(op), ctx);
  }
};
