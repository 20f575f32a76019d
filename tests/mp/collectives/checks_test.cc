// The _checks tests of torch's test_c10d_gloo.py on a live group: every bad call throws InvalidArgument
// with torch's substring on every rank, before anything is communicated (the sequence number does not move), and
// the group keeps working afterwards. Root-dependent checks follow upstream: each rank names itself root
// (or its neighbour, for the non-root cases), so that every rank's call is invalid and none communicates.
#include "tensor/cuda/device_api.h"
#include "tensor/sparse.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using Catch::Contains;

namespace {

// The tensors torch's _checks tests use: t1 = zeros([1], f32), t2 = zeros([1], f64), t3 = zeros([2], f32).
struct CheckTensors {
  Tensor t1, t2, t3;
  explicit CheckTensors(const MpFixture& f)
      : t1(f.dev(zeros({1}))), t2(f.dev(zeros({1}, DType::Float64))), t3(f.dev(zeros({2}))) {}
};

// Expects `call` to be refused with `substring`, without taking a sequence number.
#define CHECK_REFUSED(pg, call, substring)                                         \
  do {                                                                             \
    const uint64_t seq_before_ = (pg).sequence_number();                           \
    CHECK_THROWS_AS((void)(call), InvalidArgument);                                \
    CHECK_THROWS_WITH((void)(call), Contains(substring));                          \
    CHECK((pg).sequence_number() == seq_before_);                                  \
  } while (false)

// After a table of refusals the group must still work.
void check_still_usable(MpFixture& f, ProcessGroup& pg) {
  TensorList xs{f.dev(ints({f.rank() + 1}))};
  finish(pg.allreduce(xs));
  CHECK_THAT(xs[0], Equals(ints({int64_t{f.size()} * (f.size() + 1) / 2})));
}

TensorList repeat(std::initializer_list<Tensor> pattern, int times) {
  TensorList out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), pattern.begin(), pattern.end());
  return out;
}

Tensor sparse1(int64_t size) {
  return SparseTensor(from_vector<int64_t>({0}, {1, 1}), floats({1.0}), {size}).to_tensor();
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "checks: broadcast", "[checks][broadcast]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  auto bcast = [&](TensorList ts, int64_t root, int64_t root_tensor) {
    BroadcastOptions o;
    o.root_rank = root;
    o.root_tensor = root_tensor;
    return pg->broadcast(ts, o);
  };
  CHECK_REFUSED(*pg, bcast({s.t1}, -1, 0), "invalid root rank");
  CHECK_REFUSED(*pg, bcast({s.t1}, size(), 0), "invalid root rank");
  CHECK_REFUSED(*pg, bcast({s.t1}, rank(), -1), "invalid root tensor");
  CHECK_REFUSED(*pg, bcast({s.t1}, rank(), 1), "invalid root tensor");
  CHECK_REFUSED(*pg, bcast({}, rank(), 0), "invalid root tensor");
  CHECK_REFUSED(*pg, bcast({s.t1, s.t2}, rank(), 0), "invalid tensor type");
  CHECK_REFUSED(*pg, bcast({s.t1, s.t3}, rank(), 0), "invalid tensor size");
  // braid names the true index (PyTorch 1.13 says index 0) and the op, group and rank.
  CHECK_THROWS_WITH(bcast({s.t1, s.t3}, rank(), 0),
                    Contains("invalid tensor size at index 1") && Contains("broadcast") && Contains(pg->name()) &&
                        Contains(fmt::format("rank {}/{}", rank(), size())));
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: allreduce, dense and sparse", "[checks][allreduce]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  auto allreduce = [&](TensorList ts, ReduceOp op = ReduceOp::SUM) {
    AllreduceOptions o;
    o.reduce_op = op;
    return pg->allreduce(ts, o);
  };
  CHECK_REFUSED(*pg, allreduce({}), "requires non-empty tensor list");
  CHECK_REFUSED(*pg, allreduce({s.t1, s.t2}), "invalid tensor type");
  CHECK_REFUSED(*pg, allreduce({s.t1, s.t3}), "invalid tensor size");
  if (supports_sparse()) {
    const Tensor s2 = sparse1(2), s4 = sparse1(4);
    CHECK_REFUSED(*pg, allreduce({zeros({1}), s2}), "invalid tensor layout");
    CHECK_REFUSED(*pg, allreduce({s2, s4}), "invalid tensor size");
    for (ReduceOp op : {ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX}) {
      INFO(fmt::format("sparse {}", op));
      CHECK_REFUSED(*pg, allreduce({s4}, op), "unsupported reduction operation");
    }
  }
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: allreduce_coalesced", "[checks][allreduce_coalesced]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  auto coalesced = [&](TensorList ts) { return pg->allreduce_coalesced(ts); };
  CHECK_REFUSED(*pg, coalesced({}), "requires non-empty tensor list");
  CHECK_REFUSED(*pg, coalesced({s.t1, s.t2}), "tensors must all have the same type");
  if (supports_sparse()) {
    const Tensor t3 = sparse1(1);
    CHECK_REFUSED(*pg, coalesced({s.t1, t3}), "invalid tensor layout at index");
    CHECK_REFUSED(*pg, coalesced({t3, sparse1(1)}), "unsupported layout");
  }
  if (cuda::device_count() > 0 && backend() != "nccl") {
    CHECK_REFUSED(*pg, coalesced({zeros({1}).cuda(), zeros({1}).cuda()}), "unsupported device type");
  }
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: allgather", "[checks][allgather]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  const int ws = size();
  auto allgather = [&](std::vector<TensorList> outs, TensorList ins) { return pg->allgather(outs, ins); };
  CHECK_REFUSED(*pg, allgather({}, {}), "requires non-empty input tensor list");
  CHECK_REFUSED(*pg, allgather({}, {s.t1}), "requires input/output tensor lists to have the same length");
  CHECK_REFUSED(*pg, allgather({repeat({s.t1}, ws), repeat({s.t1}, ws)}, {s.t1}),
                "requires input/output tensor lists to have the same length");
  CHECK_REFUSED(*pg, allgather({repeat({s.t1}, ws - 1)}, {s.t1}), "invalid output tensor list");
  CHECK_REFUSED(*pg, allgather({repeat({s.t1}, ws + 1)}, {s.t1}), "invalid output tensor list");
  CHECK_REFUSED(*pg, allgather({repeat({s.t1, s.t1}, ws), repeat({s.t1, s.t1}, ws)}, {s.t1, s.t2}), "invalid tensor type");
  CHECK_REFUSED(*pg, allgather({repeat({s.t1, s.t1}, ws), repeat({s.t1, s.t1}, ws)}, {s.t1, s.t3}), "invalid tensor size");
  if (ws >= 2) {  // ([t1, t2] * ws)[:ws] holds a t2 only from two ranks on
    TensorList bad_type = repeat({s.t1, s.t2}, ws), bad_size = repeat({s.t1, s.t3}, ws);
    bad_type.resize(static_cast<size_t>(ws));
    bad_size.resize(static_cast<size_t>(ws));
    CHECK_REFUSED(*pg, allgather({bad_type}, {s.t1}), "invalid tensor type");
    CHECK_REFUSED(*pg, allgather({bad_size}, {s.t1}), "invalid tensor size");
  }
  // The rule behind the table: with n inputs, each output list has ws * n entries.
  CHECK_THROWS_WITH(allgather({repeat({s.t1}, ws - 1)}, {s.t1}),
                    Contains(fmt::format("invalid output tensor list at index 0 (expected length {}, got {})", ws, ws - 1)));
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: allgather_coalesced", "[checks][allgather_coalesced]") {
  auto pg = shared_group();
  const int ws = size();
  auto outputs = [&] {
    std::vector<TensorList> o;
    for (int r = 0; r < ws; ++r) o.push_back({dev(zeros({1}))});
    return o;
  };
  auto call = [&](std::vector<TensorList> outs) {
    TensorList ins{dev(zeros({1}))};
    return pg->allgather_coalesced(outs, ins);
  };
  auto o1 = outputs();
  o1[0] = {dev(zeros({0}))};
  CHECK_REFUSED(*pg, call(o1), "invalid size of output tensor at index 0");
  auto o2 = outputs();
  o2[0] = {dev(zeros({1}, DType::Float64))};
  CHECK_REFUSED(*pg, call(o2), "invalid tensor type at index 0");
  auto o3 = outputs();
  o3.push_back({dev(zeros({1}))});
  CHECK_REFUSED(*pg, call(o3), "output lists should be equal to world size");
  // Case 4 of torch's test_allgather_coalesced_checks (a flat list where a list of lists belongs) cannot be written in C++: the
  // signature takes std::vector<TensorList>, so the compiler refuses it.
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: reduce", "[checks][reduce]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  auto reduce = [&](TensorList ts, int64_t root, int64_t root_tensor) {
    ReduceOptions o;
    o.root_rank = root;
    o.root_tensor = root_tensor;
    return pg->reduce(ts, o);
  };
  CHECK_REFUSED(*pg, reduce({s.t1}, -1, 0), "invalid root rank");
  CHECK_REFUSED(*pg, reduce({s.t1}, size(), 0), "invalid root rank");
  CHECK_REFUSED(*pg, reduce({s.t1}, rank(), 1), "invalid root tensor");
  CHECK_REFUSED(*pg, reduce({s.t1, s.t1}, rank(), 0), "requires a single-element tensor list");
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: scatter (upstream table)", "[checks][scatter]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  const int ws = size();
  auto scatter = [&](TensorList outs, std::vector<TensorList> ins, int64_t root) {
    ScatterOptions o;
    o.root_rank = root;
    return pg->scatter(outs, ins, o);
  };
  const TensorList full_list = repeat({s.t1}, ws);
  CHECK_REFUSED(*pg, scatter({s.t1}, {full_list}, -1), "invalid root rank");
  CHECK_REFUSED(*pg, scatter({s.t1}, {full_list}, ws), "invalid root rank");
  CHECK_REFUSED(*pg, scatter({}, {full_list}, rank()), "requires a single-element output tensor list");
  CHECK_REFUSED(*pg, scatter({s.t1, s.t1}, {full_list}, rank()), "requires a single-element output tensor list");
  CHECK_REFUSED(*pg, scatter({s.t1}, {}, rank()), "requires a single-element input list");
  CHECK_REFUSED(*pg, scatter({s.t1}, {full_list, full_list}, rank()), "requires a single-element input list");
  CHECK_REFUSED(*pg, scatter({s.t1}, {repeat({s.t1}, ws - 1)}, rank()),
                fmt::format("Incorrect input list size {}. Input list size should be {}, same as size of the process group.",
                            ws - 1, ws));
  CHECK_REFUSED(*pg, scatter({s.t1}, {repeat({s.t1}, ws + 1)}, rank()), "Incorrect input list size");
  CHECK_REFUSED(*pg, scatter({s.t1}, {repeat({s.t2}, ws)}, rank()), "invalid tensor type");
  CHECK_REFUSED(*pg, scatter({s.t1}, {repeat({s.t3}, ws)}, rank()), "invalid tensor size");
  if (ws >= 2) CHECK_REFUSED(*pg, scatter({s.t1}, {full_list}, (rank() + 1) % ws), "requires empty input on non-root");
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: gather (upstream table)", "[checks][gather]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  const int ws = size();
  auto gather = [&](std::vector<TensorList> outs, TensorList ins, int64_t root) {
    GatherOptions o;
    o.root_rank = root;
    return pg->gather(outs, ins, o);
  };
  const TensorList full_list = repeat({s.t1}, ws);
  CHECK_REFUSED(*pg, gather({full_list}, {s.t1}, -1), "invalid root rank");
  CHECK_REFUSED(*pg, gather({full_list}, {s.t1}, ws), "invalid root rank");
  CHECK_REFUSED(*pg, gather({full_list}, {}, rank()), "requires a single-element input tensor list");
  CHECK_REFUSED(*pg, gather({full_list}, {s.t1, s.t1}, rank()), "requires a single-element input tensor list");
  CHECK_REFUSED(*pg, gather({}, {s.t1}, rank()), "requires a single-element output list");
  CHECK_REFUSED(*pg, gather({full_list, full_list}, {s.t1}, rank()), "requires a single-element output list");
  CHECK_REFUSED(*pg, gather({repeat({s.t1}, ws - 1)}, {s.t1}, rank()),
                fmt::format("Incorrect output list size {}. Output list size should be {}, same as size of the process "
                            "group.", ws - 1, ws));
  CHECK_REFUSED(*pg, gather({repeat({s.t1}, ws + 1)}, {s.t1}, rank()), "Incorrect output list size");
  CHECK_REFUSED(*pg, gather({repeat({s.t2}, ws)}, {s.t1}, rank()), "invalid tensor type");
  CHECK_REFUSED(*pg, gather({repeat({s.t3}, ws)}, {s.t1}, rank()), "invalid tensor size");
  if (ws >= 2) CHECK_REFUSED(*pg, gather({full_list}, {s.t1}, (rank() + 1) % ws), "requires empty output on non-root");
  check_still_usable(*this, *pg);
}

TEST_CASE_METHOD(MpFixture, "checks: reduce_scatter, alltoall and the *_tensor forms", "[checks]") {
  auto pg = shared_group();
  const CheckTensors s(*this);
  const int ws = size();
  {
    Tensor out = s.t1, in = dev(zeros({ws + 1}));
    CHECK_REFUSED(*pg, pg->reduce_scatter_tensor(out, in), "invalid tensor size");
    Tensor in64 = dev(zeros({ws}, DType::Float64));
    CHECK_REFUSED(*pg, pg->reduce_scatter_tensor(out, in64), "invalid tensor type");
    Tensor gathered = dev(zeros({ws + 1}));
    CHECK_REFUSED(*pg, pg->allgather_into_tensor(gathered, out), "invalid tensor size");
  }
  {
    TensorList outs{s.t1};
    std::vector<TensorList> ins{repeat({s.t1}, ws + 1)};
    CHECK_REFUSED(*pg, pg->reduce_scatter(outs, ins), "invalid input tensor list");
    std::vector<TensorList> typed{repeat({s.t2}, ws)};
    CHECK_REFUSED(*pg, pg->reduce_scatter(outs, typed), "invalid tensor type");
  }
  {
    TensorList outs = repeat({s.t1}, ws), ins = repeat({s.t1}, ws + 1);
    CHECK_REFUSED(*pg, pg->alltoall(outs, ins), "invalid input tensor list");
    Tensor out = dev(zeros({ws})), in = dev(zeros({ws}));
    CHECK_REFUSED(*pg, pg->alltoall_single(out, in, {}, std::vector<int64_t>(static_cast<size_t>(ws + 1), 0)),
                  "invalid input split sizes");
    if (ws >= 2) {
      Tensor odd = dev(zeros({2 * ws + 1}));
      CHECK_REFUSED(*pg, pg->alltoall_single(odd, in, {}, {}), "not divisible by the world size");
    }
  }
  check_still_usable(*this, *pg);
}
