// The NCCL backend on one GPU (a group of one rank over a HashStore): every collective on CUDA float32,
// float16, bfloat16 and int64 tensors, staging of bool and non-contiguous tensors, many ops in flight,
// the call-time refusals (bitwise ops, any-source receives, CPU tensors) and a timeout that aborts the
// communicator and breaks the group. With one rank the expected values are closed forms of the inputs.
//
// Without a usable GPU every test case but the first returns early with a warning saying so; the first
// checks that creating the group is refused with the reason.
#include <catch2/catch.hpp>

#include "base/config.h"

#if BRAID_HAVE_NCCL

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "collectives/nccl/nccl_engine.h"
#include "store/hash_store.h"
#include "tensor/compare.h"
#include "tensor/cuda/device_api.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"
#include "tensor/tensor.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::collectives {
namespace {

using gpu_test::no_gpu;

const DType kDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Int64};

std::shared_ptr<ProcessGroup> make_group(Millis timeout = Millis(60'000)) {
  return gpu_test::one_rank_nccl_group("nccl-test", timeout);
}

// Small integers, exact in every tested dtype: ((7 i + seed) mod 13) - 6.
Tensor values(DType dtype, const Shape& shape, int64_t seed) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((7 * static_cast<int64_t>(i) + seed) % 13 - 6);
  return from_vector(v, shape).to(dtype);
}

Tensor gpu(const Tensor& t) { return t.cuda(0); }

void check_same(const Tensor& result, const Tensor& expected) {
  REQUIRE(result.is_cuda());
  const Tensor host = result.cpu();
  CHECK(host.dtype() == expected.dtype());
  CHECK(host.shape() == expected.shape());
  CHECK(equal(host, expected));
}

std::string dname(DType d) { return std::string(dtype_name(d)); }

TEST_CASE("nccl: creating a group needs a usable CUDA device", "[gpu][nccl]") {
  if (cuda::device_count() == 0) {
    CHECK_THROWS_WITH(make_group(), Catch::Contains("nccl backend needs a CUDA device"));
    return;
  }
  BackendOptions options;
  options.store = std::make_shared<store::HashStore>();
  options.cuda_device = cuda::device_count();
  CHECK_THROWS_WITH(create_nccl_process_group(options), Catch::Contains("nccl backend needs a CUDA device"));
  auto pg = make_group();
  CHECK(pg->backend_name() == "nccl");
}

TEST_CASE("nccl: broadcast, allreduce, allreduce_coalesced and reduce on every dtype", "[gpu][nccl]") {
  if (no_gpu()) return;
  auto pg = make_group();
  for (DType dt : kDTypes) {
    INFO("dtype " << dname(dt));
    const Tensor a = values(dt, {3, 5}, 1);
    const Tensor b = values(dt, {3, 5}, 4);

    TensorList one{gpu(a)};
    pg->broadcast(one)->wait();
    check_same(one[0], a);

    // Every tensor of the list receives the root's root_tensor.
    TensorList two{gpu(a), gpu(b)};
    BroadcastOptions bo;
    bo.root_tensor = 1;
    pg->broadcast(two, bo)->wait();
    check_same(two[0], b);
    check_same(two[1], b);

    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX}) {
      INFO("op " << reduce_op_name(op));
      TensorList t{gpu(a)};
      AllreduceOptions o;
      o.reduce_op = op;
      auto work = pg->allreduce(t, o);
      work->wait();
      check_same(t[0], a);
      CHECK(work->result().size() == 1);
    }
    // Reduces over every tensor of the list too.
    TensorList pair{gpu(a), gpu(b)};
    pg->allreduce(pair)->wait();
    check_same(pair[0], a.add(b));
    check_same(pair[1], a.add(b));

    if (is_floating(dt)) {
      TensorList avg{gpu(a)};
      AllreduceOptions o;
      o.reduce_op = ReduceOp::AVG;
      pg->allreduce(avg, o)->wait();
      check_same(avg[0], a);
      TensorList pre{gpu(a)};
      o.reduce_op = ReduceOp::premul_sum(2.0);
      pg->allreduce(pre, o)->wait();
      check_same(pre[0], a.add(a));
    }

    const Tensor c = values(dt, {7}, 2);
    TensorList coalesced{gpu(a), gpu(c)};
    pg->allreduce_coalesced(coalesced)->wait();
    check_same(coalesced[0], a);
    check_same(coalesced[1], c);

    TensorList r{gpu(b)};
    ReduceOptions ro;
    ro.reduce_op = ReduceOp::MAX;
    pg->reduce(r, ro)->wait();
    check_same(r[0], b);
  }
}

TEST_CASE("nccl: allgather, gather, scatter, reduce_scatter and alltoall on every dtype", "[gpu][nccl]") {
  if (no_gpu()) return;
  auto pg = make_group();
  for (DType dt : kDTypes) {
    INFO("dtype " << dname(dt));
    const Tensor x = values(dt, {4, 6}, 3);

    std::vector<TensorList> outs{{gpu(zeros({4, 6}, dt))}};
    TensorList ins{gpu(x)};
    pg->allgather(outs, ins)->wait();
    check_same(outs[0][0], x);

    Tensor flat_out = gpu(zeros({4, 6}, dt));
    Tensor flat_in = gpu(x);
    pg->allgather_into_tensor(flat_out, flat_in)->wait();
    check_same(flat_out, x);

    std::vector<TensorList> gathered{{gpu(zeros({4, 6}, dt))}};
    TensorList gin{gpu(x)};
    pg->gather(gathered, gin)->wait();
    check_same(gathered[0][0], x);

    TensorList scattered{gpu(zeros({4, 6}, dt))};
    std::vector<TensorList> sin{{gpu(x)}};
    pg->scatter(scattered, sin)->wait();
    check_same(scattered[0], x);

    TensorList rs_out{gpu(zeros({4, 6}, dt))};
    std::vector<TensorList> rs_in{{gpu(x)}};
    pg->reduce_scatter(rs_out, rs_in)->wait();
    check_same(rs_out[0], x);

    Tensor rst_out = gpu(zeros({4, 6}, dt));
    Tensor rst_in = gpu(x);
    pg->reduce_scatter_tensor(rst_out, rst_in)->wait();
    check_same(rst_out, x);

    TensorList a2a_out{gpu(zeros({4, 6}, dt))};
    TensorList a2a_in{gpu(x)};
    pg->alltoall(a2a_out, a2a_in)->wait();
    check_same(a2a_out[0], x);

    Tensor single_out = gpu(zeros({4, 6}, dt));
    Tensor single_in = gpu(x);
    pg->alltoall_single(single_out, single_in, {}, {})->wait();
    check_same(single_out, x);
    Tensor split_out = gpu(zeros({4, 6}, dt));
    pg->alltoall_single(split_out, single_in, {4}, {4})->wait();
    check_same(split_out, x);

    pg->barrier()->wait();
  }
}

TEST_CASE("nccl: bool and non-contiguous tensors go through the base's staging", "[gpu][nccl]") {
  if (no_gpu()) return;
  auto pg = make_group();
  const Tensor flags = from_vector<double>({1, 0, 0, 1}, {4}).to(DType::Bool);
  TensorList b{gpu(flags)};
  pg->broadcast(b)->wait();
  check_same(b[0], flags);
  TensorList any{gpu(flags)};
  pg->allreduce(any)->wait();  // SUM on bool is a logical or
  check_same(any[0], flags);

  const Tensor m = values(DType::Float32, {6, 4}, 5);
  Tensor view = gpu(m).t();  // non-contiguous
  REQUIRE_FALSE(view.is_contiguous());
  TensorList v{view};
  AllreduceOptions o;
  o.reduce_op = ReduceOp::premul_sum(2.0);
  pg->allreduce(v, o)->wait();
  check_same(v[0].contiguous(), m.add(m).t().contiguous());

  // Empty tensors complete without communicating.
  TensorList empty{gpu(zeros({0}, DType::Float32))};
  pg->allreduce(empty)->wait();
  CHECK(empty[0].numel() == 0);
}

TEST_CASE("nccl: many ops in flight complete in issue order and barrier waits for all of them", "[gpu][nccl]") {
  if (no_gpu()) return;
  auto pg = make_group();
  constexpr int kOps = 64;
  std::vector<TensorList> lists;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < kOps; ++i) {
    // Every eighth op moves 64 MiB, so that ops really overlap with the issuing thread.
    const Shape shape = i % 8 == 0 ? Shape{16 << 20} : Shape{100, 100};
    lists.push_back({full(shape, i, TensorOptions(DType::Float32, Device::cuda(0)))});
  }
  for (int i = 0; i < kOps; ++i) {
    auto w = pg->allreduce(lists[static_cast<size_t>(i)]);
    if (i % 2 == 0) works.push_back(w);  // the other handles are dropped: the ops still run
  }
  CHECK(pg->sequence_number() >= static_cast<uint64_t>(kOps));
  pg->barrier()->get_future().wait();
  for (const auto& w : works) CHECK(w->is_completed());
  for (int i = 0; i < kOps; ++i) {
    const Tensor& t = lists[static_cast<size_t>(i)][0];
    CHECK(equal(t.cpu(), full(t.shape(), i, DType::Float32)));
  }
}

TEST_CASE("nccl: bitwise reductions, any-source receives, CPU and sparse tensors are refused at call time",
          "[gpu][nccl]") {
  if (no_gpu()) return;
  auto pg = make_group();
  TensorList ints{gpu(values(DType::Int64, {8}, 0))};
  for (ReduceOp op : {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
    AllreduceOptions o;
    o.reduce_op = op;
    CHECK_THROWS_AS(pg->allreduce(ints, o), InvalidArgument);
    CHECK_THROWS_WITH(pg->allreduce(ints, o), Catch::Contains("unsupported reduction operation") &&
                                                  Catch::Contains("NCCL"));
    ReduceOptions ro;
    ro.reduce_op = op;
    CHECK_THROWS_WITH(pg->reduce(ints, ro), Catch::Contains("unsupported reduction operation"));
  }
  TensorList recv{gpu(zeros({4}, DType::Float32))};
  CHECK_THROWS_WITH(pg->recv_anysource(recv, 0), Catch::Contains("any source"));
  CHECK_THROWS_AS(pg->send(recv, -1, 0), InvalidArgument);
  CHECK_THROWS_AS(pg->send(recv, 1, 0), InvalidArgument);
  // Tags would be ignored by NCCL: refused instead, before the peer is looked at.
  CHECK_THROWS_WITH(pg->send(recv, 0, 3), Catch::Contains("does not match messages by tag (got tag 3)"));
  CHECK_THROWS_WITH(pg->recv(recv, 0, 1), Catch::Contains("does not match messages by tag"));
  TensorList host{zeros({4}, DType::Float32)};
  CHECK_THROWS_WITH(pg->allreduce(host), Catch::Contains("unsupported device type"));
  TensorList sparse{SparseTensor::from_dense(values(DType::Float32, {4, 3}, 1)).to_tensor()};
  CHECK_THROWS_WITH(pg->allreduce(sparse), Catch::Contains("unsupported layout"));
  // The group is still usable after refusals.
  pg->allreduce(ints)->wait();
  check_same(ints[0], values(DType::Int64, {8}, 0));
}

// Holds the legacy default stream (where braid's kernels run and which every NCCL op waits for) until
// opened, or for 5 s at most.
struct Gate {
  std::atomic<bool> open{false};
};

void CUDART_CB hold_stream(void* arg) {
  auto* gate = static_cast<Gate*>(arg);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!gate->open.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST_CASE("nccl: an op past its deadline fails with TimeoutError and breaks the group", "[gpu][nccl]") {
  if (no_gpu()) return;
  auto pg = make_group();
  TensorList t{gpu(values(DType::Float32, {1024}, 0))};
  pg->allreduce(t)->wait();  // the communicator exists before the stream is held

  Gate gate;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaLaunchHostFunc(cudaStreamLegacy, hold_stream, &gate) == cudaSuccess);
  AllreduceOptions o;
  o.timeout = Millis(300);
  const auto started = std::chrono::steady_clock::now();
  auto work = pg->allreduce(t, o);
  try {
    work->wait(Millis(20'000));
    FAIL("the allreduce completed although its stream could not run");
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("allreduce #2") != std::string::npos);
    CHECK(message.find("nccl-test") != std::string::npos);
    CHECK(message.find("timed out") != std::string::npos);
  }
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(4));
  gate.open.store(true);
  REQUIRE(cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess);  // the host function returned

  // The error is sticky: the group is broken now.
  CHECK_THROWS_AS(pg->allreduce(t), CommError);
  CHECK_THROWS_WITH(pg->barrier(), Catch::Contains("broken"));
}

}  // namespace
}  // namespace braid::collectives

#endif  // BRAID_HAVE_NCCL
