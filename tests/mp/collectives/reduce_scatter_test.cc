// reduce_scatter_tensor and reduce_scatter (list input): torch's test_reduce_scatter_tensor (an input
// identical on every rank; rank r's output is chunk r times ws), torch's coalesced shapes,
// inputs that differ per rank and per chunk, and non-contiguous outputs.
#include "tensor/ops/shape_ops.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;

TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor: an input equal on every rank gives chunk r times ws", "[reduce_scatter]") {
  auto pg = shared_group();
  const int ws = size();
  // manual_seed(42) in torch's test: the same generator state on every rank gives the same input.
  Generator gen(42);
  const Tensor input = rand({20 * ws, 20}, {}, &gen);
  Tensor in = dev(input.clone());
  Tensor out = dev(empty({20, 20}));
  const TensorList value = finish(pg->reduce_scatter_tensor(out, in));
  CHECK_THAT(out, Equals(braid::mul(input.view({ws, 20, 20}).select(0, rank()), Scalar(double(ws))), 1e-6, 1e-6));
  REQUIRE(value.size() == 1);
  CHECK(value[0].is_same(out));
  CHECK_THAT(in, Equals(input));  // the input is left alone
}

TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor: the coalesced test's shapes, inputs differing per rank", "[reduce_scatter]") {
  auto pg = shared_group();
  const int ws = size();
  for (int64_t side : {5, 10, 15}) {
    INFO("output " << side << "x" << side);
    const int64_t chunk = side * side;
    // Element e of chunk c on rank r is r * 1000 + c * chunk + e: the sum over ranks of chunk c is
    // ws * (c * chunk + e) + 1000 * ws(ws-1)/2.
    Tensor in = dev(braid::add(arange(0, ws * chunk, 1, DType::Int64), Scalar(int64_t{1000} * rank())).view({ws * side, side}));
    Tensor out = dev(zeros({side, side}, DType::Int64));
    finish(pg->reduce_scatter_tensor(out, in));
    const Tensor want = braid::add(braid::mul(arange(rank() * chunk, (rank() + 1) * chunk, 1, DType::Int64), Scalar(int64_t{ws})),
                                   Scalar(int64_t{1000} * ws * (ws - 1) / 2))
                            .view({side, side});
    CHECK_THAT(out, Equals(want));
  }
}

TEST_CASE_METHOD(MpFixture, "reduce_scatter: list input, chunk r of every rank reduces into rank r", "[reduce_scatter]") {
  auto pg = shared_group();
  const int ws = size();
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX, ReduceOp::PRODUCT}) {
    INFO(fmt::format("{}", op));
    std::vector<TensorList> ins(1);
    // Entry k of rank r: [k * 10 + r + 1, 2] as float64.
    for (int k = 0; k < ws; ++k) ins[0].push_back(dev(floats({k * 10.0 + rank() + 1, 2.0}, DType::Float64)));
    Tensor out = column_view(dev(zeros({2}, DType::Float64)));  // a non-contiguous output
    TensorList outs{out};
    ReduceScatterOptions o;
    o.reduce_op = op;
    finish(pg->reduce_scatter(outs, ins, o));
    double a = op == ReduceOp::PRODUCT ? 1.0 : 0.0, b = a;
    for (int r = 0; r < ws; ++r) {
      const double v = rank() * 10.0 + r + 1;
      if (op == ReduceOp::SUM) a += v, b += 2.0;
      if (op == ReduceOp::MAX) a = std::max(a, v), b = 2.0;
      if (op == ReduceOp::PRODUCT) a *= v, b *= 2.0;
    }
    CHECK_THAT(out.contiguous(), Equals(floats({a, b}, DType::Float64)));
  }
}

TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor: an input given up as scratch gives the same result",
                 "[reduce_scatter]") {
  auto pg = shared_group();
  const int ws = size();
  // 12 MiB of float32: above the size where mpi reduces through an allreduce of the input.
  const int64_t chunk = (int64_t{12} << 20) / 4 / ws;
  const Tensor input = braid::add(arange(0, ws * chunk, 1, DType::Float32), Scalar(double(rank())));
  Tensor in = dev(input.clone());
  Tensor out = dev(empty({chunk}));
  collectives::ReduceScatterOptions o;
  o.input_is_scratch = true;
  finish(pg->reduce_scatter_tensor(out, in, o));
  // Chunk r summed over ranks: ws * (r * chunk + e) + ws(ws-1)/2, exact in float32 below 2^24.
  const Tensor want = braid::add(braid::mul(arange(rank() * chunk, (rank() + 1) * chunk, 1, DType::Float32),
                                            Scalar(double(ws))),
                                 Scalar(double(ws * (ws - 1) / 2)));
  CHECK_THAT(out, Equals(want, 1e-6, 1e-6));
}

// Blocks around the sizes where engines change algorithm (gloo: registered buffers up to 64 KiB, made
// anew when a larger block comes, in two areas used alternately; then the direct exchange and the ring),
// each size three times, then small again; a large alltoall in between must arrive whole after what the
// small ones left behind (their socket settings once made such transfers crawl: docs/PERFORMANCE.md).
TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor: block sizes across the engines' paths, repeated and shrinking",
                 "[reduce_scatter]") {
  auto pg = shared_group();
  const int ws = size();
  const std::vector<int64_t> block_elements = {1, 512, 513, 2048, 8192, 8193, 65536, 1, 384};  // int64
  for (int64_t chunk : block_elements) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      INFO("block of " << chunk << " int64 elements, repeat " << repeat);
      // Element e of chunk c on rank r is r * 1000 + repeat + c * chunk + e.
      Tensor in = dev(braid::add(arange(0, ws * chunk, 1, DType::Int64), Scalar(int64_t{1000} * rank() + repeat)));
      Tensor out = dev(zeros({chunk}, DType::Int64));
      finish(pg->reduce_scatter_tensor(out, in));
      const Tensor want =
          braid::add(braid::mul(arange(rank() * chunk, (rank() + 1) * chunk, 1, DType::Int64), Scalar(int64_t{ws})),
                     Scalar(int64_t{1000} * ws * (ws - 1) / 2 + int64_t{repeat} * ws));
      CHECK_THAT(out, Equals(want));
    }
    if (chunk == 8193) {
      const int64_t block = 256 * 1024;
      Tensor in = dev(braid::add(arange(0, ws * block, 1, DType::Int64), Scalar(int64_t{7} * rank())));
      Tensor out = dev(zeros({ws * block}, DType::Int64));
      finish(pg->alltoall_single(out, in, {}, {}));
      // Block q of the output is rank q's block `rank`: elements rank * block + e + 7q.
      for (int q = 0; q < ws; ++q) {
        const Tensor want = braid::add(arange(rank() * block, (rank() + 1) * block, 1, DType::Int64), Scalar(int64_t{7} * q));
        CHECK_THAT(out.narrow(0, q * block, block), Equals(want));
      }
    }
  }
}

// Groups destroyed right after their last op, on every rank at once: each op completes whole and the
// destructions stay quick. (A rank that finished first must not close connections its peers still read:
// gloo's registered buffers report a closed connection before data that already arrived, so the gloo
// group's destructor waits for every peer's word through the store. That race showed in the exchange's
// unit test under ASan, not here.)
TEST_CASE_METHOD(MpFixture, "reduce_scatter_tensor: groups destroyed right after a small reduce_scatter",
                 "[reduce_scatter]") {
  const int ws = size();
  for (int round = 0; round < 6; ++round) {
    INFO("round " << round);
    auto pg = make_group();
    const int64_t chunk = 64;
    Tensor in = dev(full({chunk * ws}, double(rank() + round)));
    Tensor out = dev(zeros({chunk}));
    finish(pg->reduce_scatter_tensor(out, in));
    CHECK_THAT(out, Equals(full({chunk}, double(ws * (ws - 1) / 2 + ws * round))));
    pg.reset();  // at once, on every rank
  }
}
