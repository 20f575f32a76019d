// allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced: torch's test_allgather_into_tensor_coalesced
// and test_reduce_scatter_tensor_coalesced (random inputs of shapes 5x5, 10x10, 15x15, the same on every rank),
// then inputs that differ per rank and per pair, a non-contiguous output, bool and float16 lists, AVG, and the
// refusals (lists of different lengths, a wrong size, mixed dtypes) that leave the group usable.
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

// torch's shapes: (5, 5), (10, 10), (15, 15).
const std::vector<int64_t> kSides = {5, 10, 15};

}  // namespace

TEST_CASE_METHOD(MpFixture, "allgather_into_tensor_coalesced: torch's shapes, inputs equal on every rank",
                 "[allgather][coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  Generator gen(42);
  TensorList inputs, outputs;
  for (int64_t s : kSides) {
    inputs.push_back(dev(rand({s, s}, {}, &gen)));
    outputs.push_back(dev(empty({s * ws, s})));
  }
  const TensorList value = finish(pg->allgather_into_tensor_coalesced(outputs, inputs));
  REQUIRE(value.size() == outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    CHECK(value[i].is_same(outputs[i]));
    CHECK_THAT(outputs[i], Equals(cat(TensorList(static_cast<size_t>(ws), inputs[i].cpu()), 0)));
  }
}

TEST_CASE_METHOD(MpFixture, "allgather_into_tensor_coalesced: every rank's pieces land in rank order",
                 "[allgather][coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  // Input i of rank r: (i * 100 + r * 10 + e) for its e-th element; inputs of 3, 1 and 4 elements.
  const std::vector<int64_t> lengths = {3, 1, 4};
  TensorList inputs, outputs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    inputs.push_back(dev(braid::add(arange(0, lengths[i], 1, DType::Int64), Scalar(int64_t(i * 100 + rank() * 10)))));
    outputs.push_back(dev(zeros({lengths[i] * ws}, DType::Int64)));
  }
  // The last output is a column of a wider tensor: not contiguous.
  const Tensor wide = dev(zeros({lengths.back() * ws, 2}, DType::Int64));
  outputs.back() = wide.select(1, 1);
  finish(pg->allgather_into_tensor_coalesced(outputs, inputs));
  for (size_t i = 0; i < lengths.size(); ++i) {
    TensorList want;
    for (int r = 0; r < ws; ++r) {
      want.push_back(braid::add(arange(0, lengths[i], 1, DType::Int64), Scalar(int64_t(i * 100 + r * 10))));
    }
    CHECK_THAT(outputs[i].contiguous(), Equals(cat(want, 0)));
  }
  CHECK_THAT(wide.select(1, 0).contiguous(), Equals(zeros({lengths.back() * ws}, DType::Int64)));
}

TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor_coalesced: torch's shapes, inputs equal on every rank",
                 "[reduce_scatter][coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  Generator gen(42);
  TensorList inputs, outputs, host;
  for (int64_t s : kSides) {
    host.push_back(rand({s * ws, s}, {}, &gen));
    inputs.push_back(dev(host.back().clone()));
    outputs.push_back(dev(empty({s, s})));
  }
  finish(pg->reduce_scatter_tensor_coalesced(outputs, inputs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int64_t s = kSides[i];
    const Tensor want = braid::mul(host[i].view({ws, s, s}).select(0, rank()), Scalar(double(ws)));
    CHECK_THAT(outputs[i], Equals(want, 1e-6, 1e-6));
    CHECK_THAT(inputs[i], Equals(host[i]));  // the inputs are left alone
  }
}

TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor_coalesced: per-rank inputs, SUM, MAX and AVG",
                 "[reduce_scatter][coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  const std::vector<int64_t> lengths = {2, 3};  // output elements per pair
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::AVG}) {
    INFO(fmt::format("{}", op));
    TensorList inputs, outputs;
    for (size_t i = 0; i < lengths.size(); ++i) {
      // Element e of input i on rank r: r + 10 * i + e (chunk c holds elements c*n .. c*n+n-1).
      inputs.push_back(
          dev(braid::add(arange(0, lengths[i] * ws, 1, DType::Float64), Scalar(double(rank() + 10 * i)))));
      outputs.push_back(dev(zeros({lengths[i]}, DType::Float64)));
    }
    ReduceScatterOptions o;
    o.reduce_op = op;
    finish(pg->reduce_scatter_tensor_coalesced(outputs, inputs, o));
    for (size_t i = 0; i < lengths.size(); ++i) {
      const Tensor base = braid::add(arange(rank() * lengths[i], (rank() + 1) * lengths[i], 1, DType::Float64),
                                     Scalar(double(10 * i)));
      Tensor want;
      if (op == ReduceOp::SUM) want = braid::add(braid::mul(base, Scalar(double(ws))), Scalar(ws * (ws - 1) / 2.0));
      if (op == ReduceOp::MAX) want = braid::add(base, Scalar(double(ws - 1)));
      if (op == ReduceOp::AVG) want = braid::add(base, Scalar((ws - 1) / 2.0));
      CHECK_THAT(outputs[i], Equals(want, 1e-12, 1e-12));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "coalesced tensor collectives: bool and float16 lists", "[coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  // bool: rank r contributes true only at element r of each chunk; SUM on bool is logical or.
  TensorList ins{dev(braid::eq(arange(0, 2 * ws, 1, DType::Int64), Scalar(int64_t{rank()})))};
  TensorList outs{dev(zeros({2}, DType::Bool))};
  finish(pg->reduce_scatter_tensor_coalesced(outs, ins));
  const Tensor any_rank_hit = braid::lt(arange(2 * rank(), 2 * rank() + 2, 1, DType::Int64), Scalar(int64_t{ws}));
  CHECK_THAT(outs[0], Equals(any_rank_hit));

  TensorList hin{dev(full({3}, 0.5 + rank(), DType::Float16))};
  TensorList hout{dev(zeros({3 * ws}, DType::Float16))};
  finish(pg->allgather_into_tensor_coalesced(hout, hin));
  TensorList want;
  for (int r = 0; r < ws; ++r) want.push_back(full({3}, 0.5 + r, DType::Float16));
  CHECK_THAT(hout[0], Equals(cat(want, 0)));
}

TEST_CASE_METHOD(MpFixture, "coalesced tensor collectives: bad lists are refused before communicating",
                 "[coalesced][checks]") {
  auto pg = shared_group();
  const int ws = size();
  const uint64_t before = pg->sequence_number();
  TensorList ins{dev(zeros({2})), dev(zeros({3}))};
  TensorList one_out{dev(zeros({2 * ws}))};
  CHECK_THROWS_WITH(pg->allgather_into_tensor_coalesced(one_out, ins),
                    Contains("requires as many output tensors as input tensors (got 1 outputs, 2 inputs)") &&
                        Contains("allgather_into_tensor_coalesced"));
  TensorList wrong{dev(zeros({2 * ws})), dev(zeros({3 * ws + 1}))};
  CHECK_THROWS_WITH(pg->allgather_into_tensor_coalesced(wrong, ins), Contains("invalid tensor size at index 1"));
  TensorList mixed{dev(zeros({2})), dev(zeros({3}, DType::Float64))};
  TensorList outs{dev(zeros({2 * ws})), dev(zeros({3 * ws}))};
  CHECK_THROWS_WITH(pg->allgather_into_tensor_coalesced(outs, mixed), Contains("invalid tensor type at index 1"));
  TensorList rs_out{dev(zeros({2})), dev(zeros({4}))};
  TensorList rs_in{dev(zeros({2 * ws})), dev(zeros({3 * ws}))};
  CHECK_THROWS_WITH(pg->reduce_scatter_tensor_coalesced(rs_out, rs_in),
                    Contains("reduce_scatter_tensor_coalesced") && Contains("invalid tensor size at index 1"));
  TensorList empty_list;
  CHECK_THROWS_WITH(pg->reduce_scatter_tensor_coalesced(empty_list, empty_list), Contains("requires non-empty"));
  CHECK(pg->sequence_number() == before);
  // Still usable.
  TensorList xs{dev(ints({rank() + 1}))};
  finish(pg->allreduce(xs));
  CHECK_THAT(xs[0], Equals(ints({int64_t{ws} * (ws + 1) / 2})));
}
