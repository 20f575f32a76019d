// broadcast: torch's test_broadcast_basics for every root and root tensor, the convenience form, every
// dtype, empty, non-contiguous and large tensors.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

TEST_CASE_METHOD(MpFixture, "broadcast: every root, one int64 tensor and two float tensors per rank", "[broadcast]") {
  auto pg = shared_group();
  for (int i = 0; i < size(); ++i) {
    INFO("root " << i);
    TensorList x{dev(ints({rank()}))};
    BroadcastOptions o;
    o.root_rank = i;
    o.root_tensor = 0;
    const TensorList out = finish(pg->broadcast(x, o));
    REQUIRE(out.size() == 1);
    CHECK_THAT(out[0], Equals(ints({i})));
    CHECK(out[0].is_same(x[0]));  // the future holds the tensors passed in, as torch's does

    for (int j = 0; j < 2; ++j) {
      INFO("root tensor " << j);
      TensorList xs{dev(floats({2.0 * rank()})), dev(floats({2.0 * rank() + 1}))};
      o.root_tensor = j;
      const TensorList res = finish(pg->broadcast(xs, o));
      // The root's chosen tensor reaches every tensor of every rank, the root's other one included.
      CHECK_THAT(xs[0], Equals(floats({2.0 * i + j})));
      CHECK_THAT(xs[1], Equals(floats({2.0 * i + j})));
      REQUIRE(res.size() == 2);
      CHECK_THAT(res[1], Equals(floats({2.0 * i + j})));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "broadcast: default options broadcast from rank 0", "[broadcast]") {
  auto pg = shared_group();
  TensorList x{dev(floats({rank() + 1.0}))};
  const TensorList out = finish(pg->broadcast(x));
  CHECK_THAT(out.at(0), Equals(floats({1.0})));
}

TEST_CASE_METHOD(MpFixture, "broadcast: every dtype moves exactly, bool included", "[broadcast][dtype]") {
  auto pg = shared_group();
  // torch's _test_bool_tensors: [1, 0, 0, 1] from rank 0 into zeros elsewhere.
  Tensor b = rank() == 0 ? ints({1, 0, 0, 1}, DType::Bool) : zeros({4}, DType::Bool);
  TensorList bl{dev(b)};
  finish(pg->broadcast(bl));
  CHECK_THAT(bl[0], Equals(ints({1, 0, 0, 1}, DType::Bool)));

  const int root = size() - 1;
  for (DType dt : kRealDTypes) {
    INFO("dtype " << dtype_name(dt));
    // Values that are exact in each dtype and differ per rank; extremes for the integer types.
    const Tensor want = is_floating(dt) ? floats({-1.5, 0.25, 1024.0, root + 0.5}, dt)
                                        : ints({-128, 127, 255, 1LL << 40, root}, dt);
    TensorList xs{dev(rank() == root ? want.clone() : zeros_like(want))};
    BroadcastOptions o;
    o.root_rank = root;
    finish(pg->broadcast(xs, o));
    CHECK_THAT(xs[0], Equals(want));
  }
}

TEST_CASE_METHOD(MpFixture, "broadcast: an empty tensor completes and the future holds it", "[broadcast][empty]") {
  auto pg = shared_group();
  TensorList xs{dev(empty({0}))};
  const TensorList out = finish(pg->broadcast(xs));
  REQUIRE(out.size() == 1);
  CHECK(out[0].numel() == 0);
  CHECK(out[0].is_same(xs[0]));
  // The group works afterwards.
  TensorList y{dev(floats({rank() + 5.0}))};
  finish(pg->broadcast(y));
  CHECK_THAT(y[0], Equals(floats({5.0})));
}

TEST_CASE_METHOD(MpFixture, "broadcast: non-contiguous tensors receive the data in place", "[broadcast][layout]") {
  auto pg = shared_group();
  const int root = size() > 1 ? 1 : 0;
  // A stride-2 column and a transposed matrix; the root's values come from a strided source too.
  Tensor col = column_view(dev(floats({10.0 * rank(), 10.0 * rank() + 1, 10.0 * rank() + 2})));
  Tensor mat = dev(arange(100 * rank(), 100 * rank() + 6, 1, DType::Int64).view({2, 3})).t();
  TensorList xs{col};
  BroadcastOptions o;
  o.root_rank = root;
  finish(pg->broadcast(xs, o));
  CHECK_THAT(col.contiguous(), Equals(floats({10.0 * root, 10.0 * root + 1, 10.0 * root + 2})));
  TensorList ms{mat};
  finish(pg->broadcast(ms, o));
  CHECK_THAT(mat.contiguous(),
             Equals(arange(100 * root, 100 * root + 6, 1, DType::Int64).view({2, 3}).t().contiguous()));
}

TEST_CASE_METHOD(MpFixture, "broadcast: a 4 MiB tensor from the last rank", "[broadcast][large]") {
  auto pg = shared_group();
  const int64_t n = 1 << 20;
  const int root = size() - 1;
  Tensor x = dev(rank() == root ? arange(0, n, 1, DType::Float32) : zeros({n}));
  TensorList xs{x};
  BroadcastOptions o;
  o.root_rank = root;
  finish(pg->broadcast(xs, o));
  CHECK_THAT(x, Equals(arange(0, n, 1, DType::Float32)));
}
