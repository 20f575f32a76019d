// gather and scatter: torch's test_gather_basics and test_scatter_basics for every root, gather of
// non-contiguous inputs (test_gather_noncontiguous_input),
// the root's future value, and multi-element tensors of several dtypes.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

namespace {

void check_gather_basics(MpFixture& f, ProcessGroup& pg, bool noncontiguous) {
  const int ws = f.size();
  for (int root = 0; root < ws; ++root) {
    INFO("root " << root << (noncontiguous ? ", non-contiguous input" : ""));
    const Tensor v = f.dev(ints({f.rank()}));
    TensorList inputs{noncontiguous ? column_view(v) : v};
    std::vector<TensorList> outputs;
    if (f.rank() == root) {
      outputs.emplace_back();
      for (int k = 0; k < ws; ++k) outputs[0].push_back(f.dev(ints({-1})));
    }
    GatherOptions o;
    o.root_rank = root;
    const TensorList value = finish(pg.gather(outputs, inputs, o));
    if (f.rank() != root) continue;
    REQUIRE(value.size() == static_cast<size_t>(ws));  // the root's future holds its flat output list
    for (int k = 0; k < ws; ++k) {
      CHECK_THAT(outputs[0][static_cast<size_t>(k)], Equals(ints({k})));
      CHECK(value[static_cast<size_t>(k)].is_same(outputs[0][static_cast<size_t>(k)]));
    }
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "gather: every root receives [[0], ..., [ws-1]]", "[gather]") {
  auto pg = shared_group();
  check_gather_basics(*this, *pg, false);
}

TEST_CASE_METHOD(MpFixture, "gather: non-contiguous inputs give the same results", "[gather][layout]") {
  auto pg = shared_group();
  check_gather_basics(*this, *pg, true);
}

TEST_CASE_METHOD(MpFixture, "gather: multi-element tensors of several dtypes into non-contiguous outputs", "[gather][dtype]") {
  auto pg = shared_group();
  const int ws = size(), root = ws - 1;
  for (DType dt : {DType::Bool, DType::Int8, DType::Float16, DType::BFloat16, DType::Float64}) {
    INFO("dtype " << dtype_name(dt));
    auto value_of = [&](int r) { return ints({r % 2, 1, r, 0}, dt).view({2, 2}); };
    TensorList in{dev(value_of(rank()))};
    std::vector<TensorList> outs;
    if (rank() == root) {
      outs.emplace_back();
      for (int k = 0; k < ws; ++k) outs[0].push_back(dev(zeros({2, 2}, dt)).t());  // transposed outputs
    }
    GatherOptions o;
    o.root_rank = root;
    finish(pg->gather(outs, in, o));
    if (rank() == root) {
      for (int k = 0; k < ws; ++k) CHECK_THAT(outs[0][static_cast<size_t>(k)].contiguous(), Equals(value_of(k)));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "scatter: every rank's output becomes the root's entry for it", "[scatter]") {
  auto pg = shared_group();
  const int ws = size();
  for (int root = 0; root < ws; ++root) {
    INFO("root " << root);
    // torch's test: the root passes ws tensors [r] (i.e. [root]); here entry k is [root * 100 + k] so that a
    // mixed-up entry shows.
    std::vector<TensorList> inputs;
    if (rank() == root) {
      inputs.emplace_back();
      for (int k = 0; k < ws; ++k) inputs[0].push_back(dev(ints({root * 100 + k})));
    }
    TensorList outputs{dev(ints({-1}))};
    ScatterOptions o;
    o.root_rank = root;
    const TensorList value = finish(pg->scatter(outputs, inputs, o));
    CHECK_THAT(outputs[0], Equals(ints({root * 100 + rank()})));
    REQUIRE(value.size() == 1);  // the one-element output list
    CHECK(value[0].is_same(outputs[0]));
  }
}

TEST_CASE_METHOD(MpFixture, "scatter: non-contiguous inputs and outputs, several dtypes", "[scatter][layout]") {
  auto pg = shared_group();
  const int ws = size(), root = 0;
  for (DType dt : {DType::UInt8, DType::Int64, DType::Float32}) {
    INFO("dtype " << dtype_name(dt));
    std::vector<TensorList> inputs;
    if (rank() == root) {
      inputs.emplace_back();
      for (int k = 0; k < ws; ++k) inputs[0].push_back(column_view(dev(ints({k, 2 * k + 1, 7}, dt))));
    }
    Tensor out = column_view(dev(zeros({3}, dt)));
    TensorList outputs{out};
    ScatterOptions o;
    o.root_rank = root;
    finish(pg->scatter(outputs, inputs, o));
    CHECK_THAT(out.contiguous(), Equals(ints({rank(), 2 * rank() + 1, 7}, dt)));
  }
}
