// Sequence numbers (torch's _get_sequence_number_for_group, as its sequence-number tests check it): equal on every rank after creation, +1 per collective of any kind, and
// still equal across ranks afterwards. The values are compared through a second group, so that the
// comparison itself does not count on the group under test.
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

namespace {

// Every rank's sequence number of `pg`, gathered over `checker`.
std::vector<int64_t> all_sequence_numbers(MpFixture& f, ProcessGroup& checker, const ProcessGroup& pg) {
  std::vector<TensorList> outs(1);
  for (int r = 0; r < f.size(); ++r) outs[0].push_back(f.dev(ints({-1})));
  TensorList in{f.dev(ints({static_cast<int64_t>(pg.sequence_number())}))};
  finish(checker.allgather(outs, in));
  std::vector<int64_t> seqs;
  for (const auto& t : outs[0]) seqs.push_back(t.cpu().item<int64_t>());
  return seqs;
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "sequence numbers: equal after creation and +1 per allreduce", "[sequence]") {
  auto pg = make_group();
  auto checker = shared_group();
  const auto initial = all_sequence_numbers(*this, *checker, *pg);
  for (int64_t s : initial) CHECK(s == initial[0]);
  const uint64_t start = pg->sequence_number();
  for (int k = 1; k <= 10; ++k) {
    TensorList xs{dev(ints({1}))};
    pg->allreduce(xs)->wait();
    CHECK(pg->sequence_number() == start + static_cast<uint64_t>(k));
  }
  const auto after = all_sequence_numbers(*this, *checker, *pg);
  for (int64_t s : after) CHECK(s == static_cast<int64_t>(start) + 10);
}

TEST_CASE_METHOD(MpFixture, "sequence numbers: every kind of collective takes exactly one", "[sequence]") {
  auto pg = make_group();
  auto checker = shared_group();
  const int ws = size();
  uint64_t expected = pg->sequence_number();
  auto step = [&](const char* op, const std::shared_ptr<Work>& w) {
    INFO(op);
    CHECK(pg->sequence_number() == ++expected);  // taken at issue, before the op completes
    w->wait();
  };
  TensorList one{dev(ints({1}))};
  step("broadcast", pg->broadcast(one));
  step("allreduce", pg->allreduce(one));
  step("allreduce_coalesced", pg->allreduce_coalesced(one));
  step("reduce", pg->reduce(one));
  std::vector<TensorList> outs(1, TensorList{});
  for (int r = 0; r < ws; ++r) outs[0].push_back(dev(ints({0})));
  step("allgather", pg->allgather(outs, one));
  Tensor gathered = dev(zeros({ws}, DType::Int64)), single = dev(ints({1}));
  step("allgather_into_tensor", pg->allgather_into_tensor(gathered, single));
  std::vector<TensorList> coalesced;
  for (int r = 0; r < ws; ++r) coalesced.push_back({dev(ints({0}))});
  step("allgather_coalesced", pg->allgather_coalesced(coalesced, one));
  std::vector<TensorList> gouts;
  if (rank() == 0) gouts = outs;
  step("gather", pg->gather(gouts, one));
  std::vector<TensorList> sins;
  if (rank() == 0) sins.push_back(outs[0]);
  step("scatter", pg->scatter(one, sins));
  std::vector<TensorList> rs_in{outs[0]};
  step("reduce_scatter", pg->reduce_scatter(one, rs_in));
  Tensor rs_out = dev(ints({0}));
  step("reduce_scatter_tensor", pg->reduce_scatter_tensor(rs_out, gathered));
  TensorList a2a_out = outs[0], a2a_in = outs[0];
  step("alltoall", pg->alltoall(a2a_out, a2a_in));
  Tensor a2a_single = dev(zeros({ws}, DType::Int64));
  step("alltoall_single", pg->alltoall_single(a2a_single, gathered, {}, {}));
  step("barrier", pg->barrier());
  const auto seqs = all_sequence_numbers(*this, *checker, *pg);
  for (int64_t s : seqs) CHECK(s == static_cast<int64_t>(expected));
}
