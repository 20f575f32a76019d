#include "tests/mp/support/reduce_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "tensor/factory.h"
#include "tests/mp/support/expect.h"

namespace braid::mp {

using collectives::ReduceOp;

namespace {

constexpr double kPremulFactor = 0.5;

// One step below 1 at the precision that makes 1 + r * step exact in the dtype for r < 4, but whose sums
// over 3-4 ranks need more bits than the 16-bit types have (they must be rounded once, at the end).
double fine_step(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 1.0 / 1024;
    case DType::BFloat16: return 1.0 / 128;
    case DType::Float32: return 1.0 / (1 << 20);
    default: return 1.0 / (1LL << 40);
  }
}

// A value next to which 1 vanishes when added in the 16-bit type itself (the spacing there is 2).
double big_value(DType dtype) { return dtype == DType::Float16 ? 2048.0 : 256.0; }

std::vector<double> float_input(ReduceOp op, DType dtype, int r) {
  if (op.kind == ReduceOp::PRODUCT) {
    // Products of these stay exact in every floating dtype: r+1 gives ws!, the rest powers of two.
    return {r + 1.0, r == 0 ? 0.5 : 2.0, -1.0, 0.25 * (r + 1)};
  }
  const bool half = dtype == DType::Float16 || dtype == DType::BFloat16;
  const double second = half ? (r == 0 ? big_value(dtype) : 1.0) : 0.5 * r;
  return {r + 1.0, second, -(r + 0.25), 1.0 + r * fine_step(dtype)};
}

std::vector<int64_t> int_input(ReduceOp op, int r) {
  // 100 + r overflows int8 when summed over 2 ranks and uint8 over 3; -3(r+1) is negative (and wraps
  // in uint8); the 0x35 pattern exercises the bitwise ops; 2^40 + r overflows int64 in a product of two
  // ranks; 2^54 + 3r + 1 is odd above 2^53, so a detour through double would change it.
  if (op.kind == ReduceOp::PRODUCT) return {r + 1, 100 + r, -(r + 1), 3, (int64_t{1} << 40) + r};
  return {r + 1, 100 + r, -3 * (r + 1), (int64_t{0x35} << (r % 3)) ^ r, (int64_t{1} << 54) + 3 * r + 1};
}

std::vector<bool> bool_input(int r) { return {r % 2 == 0, true, false, r == 0, r == 1}; }

// The input as the dtype holds it, read back as int64 (uint8 -1 reads 255, int8 200 reads -56).
std::vector<int64_t> int_values(ReduceOp op, DType dtype, int r) {
  return to_vector<int64_t>(reduce_input(op, dtype, r));
}

Tensor expected_ints(ReduceOp op, DType dtype, int ws) {
  std::vector<int64_t> acc = int_values(op, dtype, 0);
  for (int r = 1; r < ws; ++r) {
    const auto v = int_values(op, dtype, r);
    for (size_t i = 0; i < acc.size(); ++i) {
      // Unsigned arithmetic: wrapping is defined there, and narrowing below keeps the low bits as the
      // dtype's own arithmetic would.
      const auto a = static_cast<uint64_t>(acc[i]), b = static_cast<uint64_t>(v[i]);
      switch (op.kind) {
        case ReduceOp::SUM: acc[i] = static_cast<int64_t>(a + b); break;
        case ReduceOp::PRODUCT: acc[i] = static_cast<int64_t>(a * b); break;
        case ReduceOp::MIN: acc[i] = std::min(acc[i], v[i]); break;
        case ReduceOp::MAX: acc[i] = std::max(acc[i], v[i]); break;
        case ReduceOp::BAND: acc[i] = static_cast<int64_t>(a & b); break;
        case ReduceOp::BOR: acc[i] = static_cast<int64_t>(a | b); break;
        case ReduceOp::BXOR: acc[i] = static_cast<int64_t>(a ^ b); break;
        default: break;
      }
    }
  }
  return from_vector<int64_t>(acc, {static_cast<int64_t>(acc.size())}).to(dtype);
}

Tensor expected_bools(ReduceOp op, int ws) {
  std::vector<uint8_t> acc;
  for (bool b : bool_input(0)) acc.push_back(b ? 1 : 0);
  for (int r = 1; r < ws; ++r) {
    const auto v = bool_input(r);
    for (size_t i = 0; i < acc.size(); ++i) {
      const uint8_t b = v[i] ? 1 : 0;
      switch (op.kind) {
        case ReduceOp::SUM:
        case ReduceOp::MAX:
        case ReduceOp::BOR: acc[i] = acc[i] | b; break;
        case ReduceOp::PRODUCT:
        case ReduceOp::MIN:
        case ReduceOp::BAND: acc[i] = acc[i] & b; break;
        case ReduceOp::BXOR: acc[i] = acc[i] ^ b; break;
        default: break;
      }
    }
  }
  return from_vector<uint8_t>(acc, {static_cast<int64_t>(acc.size())}).to(DType::Bool);
}

Tensor expected_floats(ReduceOp op, DType dtype, int ws) {
  // The inputs as the dtype holds them; every sum and product below is exact in double.
  auto values = [&](int r) { return to_vector<double>(reduce_input(op, dtype, r)); };
  std::vector<double> acc = values(0);
  if (op.kind == ReduceOp::PREMUL_SUM) {
    for (double& a : acc) a *= kPremulFactor;
  }
  for (int r = 1; r < ws; ++r) {
    const auto v = values(r);
    for (size_t i = 0; i < acc.size(); ++i) {
      switch (op.kind) {
        case ReduceOp::SUM:
        case ReduceOp::AVG: acc[i] += v[i]; break;
        case ReduceOp::PREMUL_SUM: acc[i] += kPremulFactor * v[i]; break;
        case ReduceOp::PRODUCT: acc[i] *= v[i]; break;
        case ReduceOp::MIN: acc[i] = std::min(acc[i], v[i]); break;
        case ReduceOp::MAX: acc[i] = std::max(acc[i], v[i]); break;
        default: break;
      }
    }
  }
  if (op.kind == ReduceOp::AVG) {
    for (double& a : acc) a /= ws;
  }
  // Rounded once, from the exact value.
  return from_vector<double>(acc, {static_cast<int64_t>(acc.size())}).to(dtype);
}

}  // namespace

std::vector<ReduceOp> all_reduce_ops() {
  return {ReduceOp::SUM, ReduceOp::AVG,  ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
          ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR, ReduceOp::premul_sum(kPremulFactor)};
}

std::string case_name(ReduceOp op, DType dtype) { return fmt::format("{}/{}", op, dtype); }

std::vector<SimpleReduceCase> simple_reduce_cases(int r, int ws) {
  std::vector<SimpleReduceCase> cases = {
      {ReduceOp::SUM, floats({r + 1.0}), floats({ws * (ws + 1) / 2.0})},
      {ReduceOp::PRODUCT, floats({r + 1.0}), floats({static_cast<double>(factorial(ws))})},
      {ReduceOp::MIN, floats({r + 1.0}), floats({1.0})},
      {ReduceOp::MAX, floats({r + 1.0}), floats({static_cast<double>(ws)})},
  };
  for (int i = 0; i < 4; ++i) {
    cases.push_back({ReduceOp::BAND, ints({r | (1 << i)}, DType::Int32), ints({1 << i}, DType::Int32)});
  }
  for (int i = 1; i < 5; ++i) {
    int64_t v_or = 0, v_xor = 0;
    for (int j = 0; j < i; ++j) {
      v_or |= r * i + j;
      v_xor ^= r * i + j;
    }
    cases.push_back({ReduceOp::BOR, ints({v_or}, DType::Int32), ints({or_range(ws * i)}, DType::Int32)});
    cases.push_back({ReduceOp::BXOR, ints({v_xor}, DType::Int32), ints({xor_range(ws * i)}, DType::Int32)});
  }
  return cases;
}

bool reduce_refused(ReduceOp op, DType dtype) {
  if (op.is_bitwise()) return is_floating(dtype);
  if (op.kind == ReduceOp::AVG || op.kind == ReduceOp::PREMUL_SUM) return !is_floating(dtype);
  return false;
}

bool reduce_refused(ReduceOp op, DType dtype, const std::string& backend) {
  if (reduce_refused(op, dtype)) return true;
  // NCCL has no bitwise reductions; on bool, BAND/BOR run as MIN/MAX.
  return backend == "nccl" && op.is_bitwise() && (dtype != DType::Bool || op.kind == ReduceOp::BXOR);
}

Tensor reduce_input(ReduceOp op, DType dtype, int r) {
  if (dtype == DType::Bool) {
    std::vector<uint8_t> v;
    for (bool b : bool_input(r)) v.push_back(b ? 1 : 0);
    return from_vector<uint8_t>(v, {static_cast<int64_t>(v.size())}).to(DType::Bool);
  }
  if (is_floating(dtype)) {
    const auto v = float_input(op, dtype, r);
    return from_vector<double>(v, {static_cast<int64_t>(v.size())}).to(dtype);
  }
  const auto v = int_input(op, r);
  return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}).to(dtype);
}

Tensor reduce_expected(ReduceOp op, DType dtype, int ws) {
  if (dtype == DType::Bool) return expected_bools(op, ws);
  if (is_floating(dtype)) return expected_floats(op, dtype, ws);
  return expected_ints(op, dtype, ws);
}

}  // namespace braid::mp
