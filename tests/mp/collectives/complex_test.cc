// Complex tensors in the collectives: torch's test_tensor_dtype_complex (all_gather with lists mixing
// complex and real tensors of matching parts), then every reduction torch defines on complex numbers
// (SUM, AVG, PRODUCT), moves (broadcast, allgather_into_tensor, alltoall_single, send/recv), and the
// refusal of MIN, MAX and the bitwise ops, which leaves the group usable.
#include "tensor/complex.h"
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

// Rank r's complex64 values: (r + 1 + e) + (e - r) i for element e.
Tensor rank_values(int r, int64_t n, DType dtype = DType::Complex64) {
  const DType parts = real_dtype(dtype);
  const Tensor e = arange(0, n, 1, parts);
  return braid::complex(braid::add(e, Scalar(double(r + 1))), braid::sub(e, Scalar(double(r))));
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "complex: torch's test_tensor_dtype_complex (all_gather mixing complex and real)",
                 "[complex][allgather]") {
  auto pg = shared_group();
  const int ws = size();
  // Rank r's input: the first two draws of Generator(7 + r), so every rank knows every rank's input.
  const auto input_of = [](int r) {
    Generator g(7 + r);
    return rand({2}, {}, &g);
  };
  Tensor tensor = dev(input_of(rank()));
  Tensor tensor_c = view_as_complex(tensor);  // a 0-dim complex64 over the same two floats
  REQUIRE(tensor_c.dim() == 0);
  TensorList tensor_list;
  for (int r = 0; r < ws; ++r) tensor_list.push_back(dev(zeros({2})));
  TensorList tensor_list_c = tensor_list;  // the same storage; entry 1 seen as complex
  tensor_list_c[1] = view_as_complex(tensor_list_c[1]);
  std::vector<TensorList> outs{tensor_list};
  std::vector<TensorList> outs_c{tensor_list_c};
  int calls = 0;
  for (auto* outputs : {&outs, &outs_c}) {
    for (const Tensor& input : {tensor, tensor_c}) {
      INFO("call " << calls++);
      for (auto& t : tensor_list) t.zero_();
      TensorList in{input};
      finish(pg->allgather(*outputs, in));
      for (int r = 0; r < ws; ++r) CHECK_THAT(tensor_list[static_cast<size_t>(r)].cpu(), Equals(input_of(r)));
      CHECK_THAT(tensor_list_c[1].cpu(), Equals(view_as_complex(input_of(1))));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "complex: allreduce SUM, AVG and PRODUCT, complex64 and complex128",
                 "[complex][allreduce]") {
  auto pg = shared_group();
  const int ws = size();
  const bool nccl = backend() == "nccl";
  for (DType dtype : {DType::Complex64, DType::Complex128}) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT}) {
      if (nccl && op == ReduceOp::PRODUCT) continue;  // refused, see below
      INFO(fmt::format("{} {}", dtype, op));
      TensorList t{dev(rank_values(rank(), 5, dtype))};
      AllreduceOptions o;
      o.reduce_op = op;
      finish(pg->allreduce(t, o));
      Tensor want = rank_values(0, 5, dtype);
      for (int r = 1; r < ws; ++r) {
        want = op == ReduceOp::PRODUCT ? braid::mul(want, rank_values(r, 5, dtype)) : braid::add(want, rank_values(r, 5, dtype));
      }
      if (op == ReduceOp::AVG) want = braid::div(want, Scalar(double(ws)));
      CHECK(t[0].dtype() == dtype);
      CHECK_THAT(t[0].cpu(), Equals(want, 1e-5, 1e-5));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "complex: reduce, reduce_scatter_tensor and PRODUCT through reduce", "[complex][reduce]") {
  auto pg = shared_group();
  const int ws = size();
  TensorList t{dev(rank_values(rank(), 3))};
  ReduceOptions ro;
  ro.root_rank = ws - 1;
  finish(pg->reduce(t, ro));
  Tensor sum = rank_values(0, 3);
  for (int r = 1; r < ws; ++r) sum = braid::add(sum, rank_values(r, 3));
  if (rank() == ws - 1) CHECK_THAT(t[0].cpu(), Equals(sum, 1e-6, 1e-6));

  Tensor input = dev(rank_values(rank(), 2 * ws));
  Tensor output = dev(zeros({2}, DType::Complex64));
  finish(pg->reduce_scatter_tensor(output, input));
  Tensor whole = rank_values(0, 2 * ws);
  for (int r = 1; r < ws; ++r) whole = braid::add(whole, rank_values(r, 2 * ws));
  CHECK_THAT(output.cpu(), Equals(whole.narrow(0, 2 * rank(), 2), 1e-6, 1e-6));

  if (backend() != "nccl") {
    TensorList p{dev(rank_values(rank(), 3, DType::Complex128))};
    ReduceOptions po;
    po.reduce_op = ReduceOp::PRODUCT;
    po.root_rank = 0;
    finish(pg->reduce(p, po));
    Tensor prod = rank_values(0, 3, DType::Complex128);
    for (int r = 1; r < ws; ++r) prod = braid::mul(prod, rank_values(r, 3, DType::Complex128));
    if (rank() == 0) CHECK_THAT(p[0].cpu(), Equals(prod, 1e-12, 1e-12));
  }
}

TEST_CASE_METHOD(MpFixture, "complex: broadcast, alltoall_single and send/recv move both parts",
                 "[complex][broadcast]") {
  auto pg = shared_group();
  const int ws = size();
  TensorList b{dev(rank_values(rank(), 4, DType::Complex128))};
  BroadcastOptions bo;
  bo.root_rank = ws - 1;
  finish(pg->broadcast(b, bo));
  CHECK_THAT(b[0].cpu(), Equals(rank_values(ws - 1, 4, DType::Complex128)));

  // Row r of the output comes from rank r: its row `rank()`.
  Tensor in = dev(braid::cat(TensorList(static_cast<size_t>(ws), rank_values(rank(), 3).view({1, 3})), 0));
  Tensor out = dev(zeros({ws, 3}, DType::Complex64));
  finish(pg->alltoall_single(out, in, {}, {}));
  for (int r = 0; r < ws; ++r) CHECK_THAT(out.cpu().select(0, r).contiguous(), Equals(rank_values(r, 3)));

  if (backend() != "nccl" && ws >= 2 && rank() < 2) {
    TensorList msg{dev(rank_values(rank() == 0 ? 10 : 0, 6))};
    if (rank() == 0) {
      finish(pg->send(msg, 1, 0));
    } else {
      finish(pg->recv(msg, 0, 0));
      CHECK_THAT(msg[0].cpu(), Equals(rank_values(10, 6)));
    }
  }
  finish(pg->barrier());
}

TEST_CASE_METHOD(MpFixture, "complex: MIN, MAX and the bitwise ops are refused, the group stays usable",
                 "[complex][checks]") {
  auto pg = shared_group();
  const uint64_t before = pg->sequence_number();
  for (ReduceOp op : {ReduceOp::MIN, ReduceOp::MAX, ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
    TensorList t{dev(rank_values(rank(), 2))};
    AllreduceOptions o;
    o.reduce_op = op;
    CHECK_THROWS_WITH(pg->allreduce(t, o), Contains(fmt::format("allreduce does not support {} on complex tensors", op)) &&
                                               Contains(fmt::format("rank {}", rank())));
  }
  Tensor out = dev(zeros({1}, DType::Complex64));
  Tensor in = dev(rank_values(rank(), size()));
  ReduceScatterOptions ro;
  ro.reduce_op = ReduceOp::MAX;
  CHECK_THROWS_WITH(pg->reduce_scatter_tensor(out, in, ro),
                    Contains("reduce_scatter_tensor does not support MAX on complex tensors"));
  if (backend() == "nccl") {
    TensorList t{dev(rank_values(rank(), 2))};
    AllreduceOptions o;
    o.reduce_op = ReduceOp::PRODUCT;
    CHECK_THROWS_WITH(pg->allreduce(t, o), Contains("NCCL has no complex type"));
  }
  CHECK(pg->sequence_number() == before);
  TensorList ok{dev(rank_values(rank(), 2))};
  finish(pg->allreduce(ok));
}
