// allgather (list outputs), allgather_into_tensor and allgather_coalesced: torch's test_allgather_basics
// for 1-3 inputs per rank, non-contiguous inputs (test_allgather_noncontiguous_input), the future values
// (a flat list for one input, a list of lists for more, as torch's), torch's async
// all_gather_coalesced case, every dtype and empty tensors, and blocks on both sides of gloo's switch from
// one step to its ring.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

namespace {

void check_allgather_basics(MpFixture& f, ProcessGroup& pg, bool noncontiguous) {
  const int ws = f.size();
  for (int n = 1; n <= 3; ++n) {
    INFO(n << " input(s) per rank" << (noncontiguous ? ", non-contiguous" : ""));
    TensorList inputs;
    for (int i = 0; i < n; ++i) {
      const Tensor v = f.dev(ints({n * f.rank() + i}));
      inputs.push_back(noncontiguous ? column_view(v) : v);
    }
    std::vector<TensorList> outputs(static_cast<size_t>(n));
    for (auto& list : outputs) {
      for (int k = 0; k < n * ws; ++k) list.push_back(f.dev(ints({-1})));
    }
    const TensorList value = finish(pg.allgather(outputs, inputs));
    // Every one of the n output lists is [0, 1, ..., n*ws - 1]: rank-major, each rank's inputs in order.
    for (int l = 0; l < n; ++l) {
      for (int k = 0; k < n * ws; ++k) {
        INFO("output list " << l << ", entry " << k);
        CHECK_THAT(outputs[static_cast<size_t>(l)][static_cast<size_t>(k)], Equals(ints({k})));
      }
    }
    // The future holds the output lists, flat (for one input: the one list of ws tensors).
    REQUIRE(value.size() == static_cast<size_t>(n * n * ws));
    for (size_t k = 0; k < value.size(); ++k) {
      CHECK(value[k].is_same(outputs[k / static_cast<size_t>(n * ws)][k % static_cast<size_t>(n * ws)]));
    }
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "allgather: one to three inputs per rank", "[allgather]") {
  auto pg = shared_group();
  check_allgather_basics(*this, *pg, false);
}

TEST_CASE_METHOD(MpFixture, "allgather: non-contiguous inputs give the same results", "[allgather][layout]") {
  auto pg = shared_group();
  check_allgather_basics(*this, *pg, true);
}

TEST_CASE_METHOD(MpFixture, "allgather: every dtype, multi-element and empty tensors", "[allgather][dtype]") {
  auto pg = shared_group();
  const int ws = size();
  for (DType dt : kRealDTypes) {
    INFO("dtype " << dtype_name(dt));
    auto value_of = [&](int r) {
      return is_floating(dt) ? floats({r + 0.5, -r - 0.25, 3.0}, dt) : ints({r, 1 - r, 1LL << 40 | r}, dt);
    };
    TensorList in{dev(value_of(rank()).view({3, 1}))};
    std::vector<TensorList> outs(1);
    for (int k = 0; k < ws; ++k) outs[0].push_back(dev(zeros({3, 1}, dt)));
    finish(pg->allgather(outs, in));
    for (int k = 0; k < ws; ++k) CHECK_THAT(outs[0][static_cast<size_t>(k)], Equals(value_of(k).view({3, 1})));
  }
  TensorList ein{dev(empty({0}))};
  std::vector<TensorList> eouts(1);
  for (int k = 0; k < ws; ++k) eouts[0].push_back(dev(empty({0})));
  CHECK(finish(pg->allgather(eouts, ein)).size() == static_cast<size_t>(ws));
}

TEST_CASE_METHOD(MpFixture, "allgather_into_tensor: rank-major concatenation along dim 0", "[allgather]") {
  auto pg = shared_group();
  const int ws = size();
  for (const Shape& shape : {Shape{5, 5}, Shape{10, 10}, Shape{15, 15}}) {
    INFO("input " << shape_str(shape));
    const int64_t numel = shape_numel(shape);
    Tensor input = dev(arange(rank() * numel, (rank() + 1) * numel, 1, DType::Float32).view(shape));
    Tensor output = dev(zeros({shape[0] * ws, shape[1]}));
    const TensorList value = finish(pg->allgather_into_tensor(output, input));
    CHECK_THAT(output, Equals(arange(0, ws * numel, 1, DType::Float32).view({shape[0] * ws, shape[1]})));
    REQUIRE(value.size() == 1);
    CHECK(value[0].is_same(output));
  }
  // A transposed (non-contiguous) input.
  Tensor t = dev(arange(0, 6, 1, DType::Int64).view({2, 3})).t();
  Tensor out = dev(zeros({3 * ws, 2}, DType::Int64));
  finish(pg->allgather_into_tensor(out, t));
  for (int k = 0; k < ws; ++k) {
    CHECK_THAT(out.narrow(0, 3 * k, 3).contiguous(), Equals(arange(0, 6, 1, DType::Int64).view({2, 3}).t().contiguous()));
  }
}

TEST_CASE_METHOD(MpFixture, "allgather_into_tensor: blocks on both sides of the engines' algorithm switch, in place too",
                 "[allgather]") {
  // gloo gathers blocks of up to 512 KiB in one step and larger ones in its ring (collectives/gloo/gloo_engine.cc);
  // mpi stages outputs of up to 1 MiB and, on more than 2 ranks, leaves larger ones to MPI_Iallgather
  // rather than its direct exchange (collectives/mpi/direct_exchange.cc). These sizes run each path, and an input that
  // is this rank's own block of the output.
  auto pg = shared_group();
  const int ws = size();
  for (int64_t numel : {int64_t{1}, int64_t{128 * 1024}, int64_t{160 * 1024}}) {
    for (bool in_place : {false, true}) {
      INFO(numel << " float32 per rank" << (in_place ? ", in place" : ""));
      const Tensor want = arange(0, ws * numel, 1, DType::Float32);
      Tensor output = dev(zeros({ws * numel}));
      Tensor input = in_place ? output.narrow(0, rank() * numel, numel)
                              : dev(arange(rank() * numel, (rank() + 1) * numel, 1, DType::Float32));
      if (in_place) input.copy_(dev(arange(rank() * numel, (rank() + 1) * numel, 1, DType::Float32)));
      finish(pg->allgather_into_tensor(output, input));
      CHECK_THAT(output, Equals(want));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "allgather_coalesced: output list r holds rank r's inputs", "[allgather_coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  // torch's async case (test_allgather_coalesced_async): for i in {0, 1}, inputs 2 x [i + r]; output list r' must hold 2 x [i + r'].
  std::vector<TensorList> inputs;
  std::vector<std::vector<TensorList>> outputs;
  for (int i = 0; i < 2; ++i) {
    inputs.push_back({dev(ints({i + rank()})), dev(ints({i + rank()}))});
    outputs.emplace_back();
    for (int r2 = 0; r2 < ws; ++r2) outputs.back().push_back({dev(zeros({1}, DType::Int64)), dev(zeros({1}, DType::Int64))});
  }
  std::vector<Future<TensorList>> futs;
  for (int i = 0; i < 2; ++i) {
    futs.push_back(pg->allgather_coalesced(outputs[static_cast<size_t>(i)], inputs[static_cast<size_t>(i)])->get_future());
  }
  wait_all(futs, kTestGroupTimeout);
  for (int i = 0; i < 2; ++i) {
    for (int r2 = 0; r2 < ws; ++r2) {
      INFO("call " << i << ", output list " << r2);
      for (const Tensor& t : outputs[static_cast<size_t>(i)][static_cast<size_t>(r2)]) CHECK_THAT(t, Equals(ints({i + r2})));
    }
  }
  // Inputs of different shapes and sizes in one call.
  TensorList in{dev(full({2, 2}, double(rank()))), dev(full({3}, -double(rank())))};
  std::vector<TensorList> outs;
  for (int r2 = 0; r2 < ws; ++r2) outs.push_back({dev(zeros({2, 2})), dev(zeros({3}))});
  finish(pg->allgather_coalesced(outs, in));
  for (int r2 = 0; r2 < ws; ++r2) {
    CHECK_THAT(outs[static_cast<size_t>(r2)][0], Equals(full({2, 2}, double(r2))));
    CHECK_THAT(outs[static_cast<size_t>(r2)][1], Equals(full({3}, -double(r2))));
  }
}
