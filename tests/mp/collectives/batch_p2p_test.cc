// batch_isend_irecv with P2POp (collectives/registry/batch_p2p.h): torch's ring of test_batch_isend_irecv_*
// (every rank sends to its right and receives from its left in one batch), a pair that exchanges 4 MiB both
// ways at once, several ops per peer kept apart by tags, a subgroup addressed by global ranks, and the
// refusals: an empty list, ops on two groups, a peer outside the group, the rank itself, a missing tensor.
// A refused batch sends nothing, and the group goes on working.
#include "collectives/registry/batch_p2p.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/registry_scope.h"

using namespace braid;
using namespace braid::mp;
using namespace braid::collectives;
using Catch::Contains;

namespace {

void wait_all(const std::vector<std::shared_ptr<Work>>& works) {
  for (const auto& w : works) w->wait();
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "batch_isend_irecv: a ring, every rank sending right and receiving left at once",
                 "[p2p][batch]") {
  if (size() < 2) return;
  Registry registry(*this);
  const int right = (rank() + 1) % size(), left = (rank() + size() - 1) % size();
  for (DType dt : {DType::Float32, DType::Int64, DType::BFloat16}) {
    INFO(dtype_name(dt));
    Tensor send = dev(full({10}, rank() + 1, dt));
    Tensor recv = dev(zeros({10}, dt));
    const auto works = batch_isend_irecv({{P2PKind::ISend, send, right}, {P2PKind::IRecv, recv, left}});
    REQUIRE(works.size() == 2);
    wait_all(works);
    CHECK_THAT(recv, Equals(full({10}, left + 1, dt)));
  }
}

TEST_CASE_METHOD(MpFixture, "batch_isend_irecv: two ranks exchange 4 MiB both ways in one batch", "[p2p][batch]") {
  if (size() < 2) return;
  Registry registry(*this);  // every rank: init_process_group is collective
  if (rank() > 1) return;
  const int other = 1 - rank();
  const int64_t n = (int64_t{4} << 20) / 4;
  Tensor send = dev(braid::add(arange(0, n, 1, DType::Float32), Scalar(double(rank()))));
  Tensor recv = dev(empty({n}));
  // Both ranks put their send first: posting never waits for the partner's receive.
  wait_all(batch_isend_irecv({{P2PKind::ISend, send, other}, {P2PKind::IRecv, recv, other}}));
  CHECK_THAT(recv, Equals(braid::add(arange(0, n, 1, DType::Float32), Scalar(double(other)))));
}

TEST_CASE_METHOD(MpFixture, "batch_isend_irecv: several ops per peer, matched by tag", "[p2p][batch]") {
  if (size() < 2) return;
  Registry registry(*this);
  const int right = (rank() + 1) % size(), left = (rank() + size() - 1) % size();
  std::vector<P2POp> ops;
  TensorList received;
  // Sends tagged 0, 1, 2 carry 100 * rank + tag; the receives are posted in the opposite tag order.
  for (int tag = 0; tag < 3; ++tag) ops.push_back({P2PKind::ISend, dev(ints({100 * rank() + tag})), right, {}, tag});
  for (int tag = 2; tag >= 0; --tag) {
    received.push_back(dev(ints({-1})));
    ops.push_back({P2PKind::IRecv, received.back(), left, {}, tag});
  }
  if (backend() == "nccl") {
    // NCCL matches by order only: tags other than 0 are refused, not ignored.
    CHECK_THROWS_WITH(batch_isend_irecv(ops), Contains("tag"));
    return;
  }
  wait_all(batch_isend_irecv(ops));
  for (int k = 0; k < 3; ++k) CHECK_THAT(received[static_cast<size_t>(k)], Equals(ints({100 * left + (2 - k)})));
}

TEST_CASE_METHOD(MpFixture, "batch_isend_irecv: a subgroup's peers are global ranks", "[p2p][batch][groups]") {
  if (size() < 3) return;
  Registry registry(*this);
  // Ranks 1 and 2 (group ranks 0 and 1) exchange; every rank makes the group.
  auto group = new_group({1, 2});
  if (rank() != 1 && rank() != 2) {
    CHECK(batch_isend_irecv({{P2PKind::ISend, dev(ints({0})), 1, group}}).empty());  // a non-member: nothing
    return;
  }
  const int other = rank() == 1 ? 2 : 1;
  Tensor recv = dev(ints({0}));
  wait_all(batch_isend_irecv({{P2PKind::ISend, dev(ints({rank() * 7})), other, group},
                              {P2PKind::IRecv, recv, other, group}}));
  CHECK_THAT(recv, Equals(ints({other * 7})));
}

TEST_CASE_METHOD(MpFixture, "batch_isend_irecv: bad lists are refused before anything is sent", "[p2p][batch][checks]") {
  if (size() < 2) return;
  Registry registry(*this);
  const int right = (rank() + 1) % size(), left = (rank() + size() - 1) % size();
  CHECK_THROWS_WITH(batch_isend_irecv({}), Contains("Invalid ``p2p_op_list``"));
  auto world = default_group();
  CHECK_THROWS_WITH(batch_isend_irecv({{P2PKind::ISend, dev(ints({1})), right},
                                       {P2PKind::IRecv, dev(ints({1})), left, world}}),
                    Contains("All ops need to use the same group") && Contains("op 1 (irecv with peer"));
  CHECK_THROWS_WITH(batch_isend_irecv({{P2PKind::ISend, dev(ints({1})), right}, {P2PKind::ISend, dev(ints({1})), size()}}),
                    Contains("op 1 (isend with peer " + std::to_string(size()) + ")") && Contains("invalid peer rank"));
  CHECK_THROWS_WITH(batch_isend_irecv({{P2PKind::IRecv, dev(ints({1})), rank()}}),
                    Contains("cannot be its own peer"));
  CHECK_THROWS_WITH(batch_isend_irecv({{P2PKind::ISend, dev(ints({1})), right}, {P2PKind::IRecv, Tensor(), left}}),
                    Contains("op 1 (irecv with peer " + std::to_string(left) + ") has no tensor"));
  // Nothing of the refused batches was sent: the ring that follows receives exactly its own message.
  Tensor recv = dev(ints({-1}));
  wait_all(batch_isend_irecv({{P2PKind::ISend, dev(ints({rank()})), right}, {P2PKind::IRecv, recv, left}}));
  CHECK_THAT(recv, Equals(ints({left})));
}
