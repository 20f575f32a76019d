// Round-robin groups (torch's test_c10d_gloo.py test_round_robin, plus many ops in flight under one
// barrier) and broadcast_coalesced (torch's CommTest._test_broadcast_coalesced: its 30 tensors, 256-byte
// buckets) over plain groups of the backend under test. groups_test.cc covers the same APIs through the
// group registry (create/destroy without leaked threads, every bucket size).
#include "collectives/registry/coalesced.h"
#include "collectives/registry/round_robin.h"
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using collectives::RoundRobinProcessGroup;

TEST_CASE_METHOD(MpFixture, "round robin: broadcasts over two groups", "[round_robin]") {
  auto rr = std::make_shared<RoundRobinProcessGroup>(std::vector<std::shared_ptr<ProcessGroup>>{make_group(), make_group()});
  CHECK(rr->rank() == rank());
  CHECK(rr->size() == size());
  // groups + 1 broadcasts, so one group serves twice.
  for (int i = 0; i < 3; ++i) {
    INFO("broadcast " << i);
    TensorList xs{dev(full({100, 100}, double(rank())))};
    finish(rr->broadcast(xs));
    CHECK_THAT(xs[0], Equals(zeros({100, 100})));
  }
  // Many ops in flight over both groups, then a barrier that covers all of them.
  std::vector<Tensor> ts;
  for (int i = 0; i < 20; ++i) {
    ts.push_back(dev(ints({i})));
    TensorList l{ts.back()};
    rr->allreduce(l);
  }
  rr->barrier()->wait();
  for (int i = 0; i < 20; ++i) CHECK_THAT(ts[static_cast<size_t>(i)], Equals(ints({i * size()})));
}

TEST_CASE_METHOD(MpFixture, "broadcast_coalesced: _test_broadcast_coalesced's 30 tensors in 256-byte buckets, every root",
                 "[broadcast_coalesced]") {
  auto pg = shared_group();
  // 6 groups of arange(60).chunk(5): 12 elements each; torch's dtypes with half replaced by float32
  // on the CPU (here, and also genuinely 16-bit and integer groups: braid moves them exactly).
  const std::vector<DType> dtypes = {DType::Float32, DType::Float32, DType::Float32, DType::Float64,
                                     DType::Float32, DType::Float32, DType::Float16,  DType::BFloat16,
                                     DType::Int64};
  TensorList target;
  for (DType dt : dtypes) {
    for (int c = 0; c < 5; ++c) target.push_back(arange(12 * c, 12 * (c + 1), 1, DType::Int64).to(dt));
  }
  for (int root = 0; root < size(); ++root) {
    INFO("root " << root);
    TensorList tensors;
    for (const Tensor& t : target) tensors.push_back(dev(rank() == root ? t.clone() : zeros_like(t)));
    collectives::broadcast_coalesced(*pg, tensors, 256, root);
    for (size_t i = 0; i < target.size(); ++i) {
      INFO("tensor " << i);
      CHECK_THAT(tensors[i], Equals(target[i]));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "broadcast_coalesced: non-contiguous tensors and one larger than the bucket", "[broadcast_coalesced]") {
  auto pg = shared_group();
  const int root = size() - 1;
  Tensor big = dev(rank() == root ? arange(0, 1000, 1, DType::Float32) : zeros({1000}));
  Tensor col = column_view(dev(rank() == root ? floats({1, 2, 3}) : zeros({3})));
  Tensor tr = dev(rank() == root ? arange(0, 6, 1, DType::Int64).view({2, 3}) : zeros({2, 3}, DType::Int64)).t();
  collectives::broadcast_coalesced(*pg, {big, col, tr}, 64, root);
  CHECK_THAT(big, Equals(arange(0, 1000, 1, DType::Float32)));
  CHECK_THAT(col.contiguous(), Equals(floats({1, 2, 3})));
  CHECK_THAT(tr.contiguous(), Equals(arange(0, 6, 1, DType::Int64).view({2, 3}).t().contiguous()));
}
