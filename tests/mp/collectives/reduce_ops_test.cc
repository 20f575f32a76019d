// Every ReduceOp × every dtype, through each reducing collective (allreduce, reduce, allreduce_coalesced,
// reduce_scatter, reduce_scatter_tensor), against the reference model of support/reduce_reference.h:
// integer wrap-around, logical bool, float16/bfloat16 rounded once, AVG and PREMUL_SUM. Pairs that make no
// sense (bitwise on floats, AVG/PREMUL_SUM on integers) must be refused on the calling thread, before any
// communication, leaving the sequence number and the group as they were.
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/reduce_reference.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

// Runs `call` expecting the refusal, and checks that nothing was issued.
template <class F>
void check_refused(ProcessGroup& pg, F&& call) {
  const uint64_t seq = pg.sequence_number();
  CHECK_THROWS_AS(call(), InvalidArgument);
  CHECK_THROWS_WITH(call(), Contains("unsupported reduction operation"));
  CHECK(pg.sequence_number() == seq);
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "reduce ops x dtypes: allreduce", "[allreduce][dtype]") {
  auto pg = shared_group();
  for (DType dt : kRealDTypes) {
    for (ReduceOp op : all_reduce_ops()) {
      INFO(case_name(op, dt));
      TensorList xs{dev(reduce_input(op, dt, rank()))};
      AllreduceOptions o;
      o.reduce_op = op;
      if (reduce_refused(op, dt, backend())) {
        check_refused(*pg, [&] { return pg->allreduce(xs, o); });
        continue;
      }
      finish(pg->allreduce(xs, o));
      CHECK_THAT(xs[0], Equals(reduce_expected(op, dt, size())));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "reduce ops x dtypes: reduce to a rotating root", "[reduce][dtype]") {
  auto pg = shared_group();
  int n = 0;
  for (DType dt : kRealDTypes) {
    for (ReduceOp op : all_reduce_ops()) {
      const int root = n++ % size();
      INFO(case_name(op, dt) << " root " << root);
      const Tensor input = reduce_input(op, dt, rank());
      TensorList xs{dev(input.clone())};
      ReduceOptions o;
      o.reduce_op = op;
      o.root_rank = root;
      if (reduce_refused(op, dt, backend())) {
        check_refused(*pg, [&] { return pg->reduce(xs, o); });
        continue;
      }
      finish(pg->reduce(xs, o));
      if (rank() == root) CHECK_THAT(xs[0], Equals(reduce_expected(op, dt, size())));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "reduce ops x dtypes: allreduce_coalesced of two tensors", "[allreduce_coalesced][dtype]") {
  auto pg = shared_group();
  for (DType dt : kRealDTypes) {
    for (ReduceOp op : all_reduce_ops()) {
      INFO(case_name(op, dt));
      const Tensor input = reduce_input(op, dt, rank());
      const int64_t n = input.numel();
      // The input split in two tensors of different shapes; each position reduces separately.
      TensorList xs{dev(input.narrow(0, 0, 2).clone()), dev(input.narrow(0, 2, n - 2).clone().view({1, n - 2}))};
      AllreduceCoalescedOptions o;
      o.reduce_op = op;
      if (reduce_refused(op, dt, backend())) {
        check_refused(*pg, [&] { return pg->allreduce_coalesced(xs, o); });
        continue;
      }
      finish(pg->allreduce_coalesced(xs, o));
      const Tensor want = reduce_expected(op, dt, size());
      CHECK_THAT(xs[0], Equals(want.narrow(0, 0, 2).contiguous()));
      CHECK_THAT(xs[1], Equals(want.narrow(0, 2, n - 2).contiguous().view({1, n - 2})));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "reduce ops x dtypes: reduce_scatter_tensor and reduce_scatter", "[reduce_scatter][dtype]") {
  auto pg = shared_group();
  const int ws = size();
  for (DType dt : kRealDTypes) {
    for (ReduceOp op : all_reduce_ops()) {
      INFO(case_name(op, dt));
      // Block b of rank r's input is the model input of rank (r + b) % ws: every block's reduction
      // covers each model input once, so every rank's output is the model's result.
      std::vector<Tensor> blocks;
      for (int b = 0; b < ws; ++b) blocks.push_back(reduce_input(op, dt, (rank() + b) % ws));
      Tensor input = dev(braid::cat(blocks, 0));
      Tensor output = dev(zeros_like(blocks[0]));
      ReduceScatterOptions o;
      o.reduce_op = op;
      TensorList outs{dev(zeros_like(blocks[0]))};
      std::vector<TensorList> ins{TensorList{}};
      for (const auto& b : blocks) ins[0].push_back(dev(b));
      if (reduce_refused(op, dt, backend())) {
        check_refused(*pg, [&] { return pg->reduce_scatter_tensor(output, input, o); });
        check_refused(*pg, [&] { return pg->reduce_scatter(outs, ins, o); });
        continue;
      }
      const Tensor want = reduce_expected(op, dt, ws);
      finish(pg->reduce_scatter_tensor(output, input, o));
      CHECK_THAT(output, Equals(want));
      finish(pg->reduce_scatter(outs, ins, o));
      CHECK_THAT(outs[0], Equals(want));
    }
  }
}
