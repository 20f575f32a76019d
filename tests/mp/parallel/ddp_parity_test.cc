// DDP against a single process on the concatenated batch (torch's test_c10d_gloo.py DDP tests,
// _test_ddp_with_process_group): each rank trains a DDP copy on its slice of the global batch, a vanilla copy
// trains on the whole batch, and after every iteration the gradients and parameters agree. Many small buckets
// (bucket_cap_mb = 0.001), with and without gradient_as_bucket_view and find_unused_parameters; then no_sync,
// the bucket rebuild and the logging data.
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/variable.h"
#include "collectives/queue/engine_process_group.h"
#include "nn/embedding.h"
#include "parallel/ddp/ddp.h"
#include "tensor/compare.h"
#include "tensor/sparse.h"
#include "tests/mp/parallel/ddp_models.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using parallel::DDPOptions;
using parallel::DistributedDataParallel;

namespace {


void check_parity(MpFixture& f, DDPOptions options, int iterations) {
  const int ws = f.size(), r = f.rank();
  constexpr int64_t kLocalBatch = 2;
  auto vanilla = std::make_shared<ParityNet>(7);
  auto local = std::make_shared<ParityNet>(7);
  if (!options.process_group) options.process_group = f.shared_group();
  DistributedDataParallel ddp(local, options);
  for (int it = 0; it < iterations; ++it) {
    INFO("iteration " << it);
    Generator gen(1337 + static_cast<uint64_t>(it));
    const Tensor input = rand({ws * kLocalBatch, 2}, {}, &gen);
    const Tensor target = rand({ws * kLocalBatch, 4}, {}, &gen);
    autograd::backward(autograd::mse_loss(vanilla->forward(input), target));
    const Tensor mine = input.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch);
    const Tensor mine_target = target.slice(0, r * kLocalBatch, (r + 1) * kLocalBatch);
    autograd::backward(autograd::mse_loss(ddp.forward(mine), mine_target));
    const auto vp = vanilla->named_parameters();
    const auto dp = local->named_parameters();
    for (size_t i = 0; i < vp.size(); ++i) {
      INFO(vp[i].first);
      const Tensor dg = autograd::grad(dp[i].second);
      REQUIRE(dg.defined());
      CHECK(allclose(dg, autograd::grad(vp[i].second), 1e-5, 1e-7));
    }
    sgd_step(*vanilla);
    sgd_step(*local);
    for (size_t i = 0; i < vp.size(); ++i) CHECK(allclose(dp[i].second, vp[i].second, 1.3e-6, 5e-5));
  }
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp: gradients equal a single process on the whole batch", "[ddp]") {
  DDPOptions o;
  o.bucket_cap_mb = 0.001;  // about 1 KiB: many buckets after the rebuild
  SECTION("default") { check_parity(*this, o, 3); }
  SECTION("gradient_as_bucket_view") {
    o.gradient_as_bucket_view = true;
    check_parity(*this, o, 3);
  }
  SECTION("find_unused_parameters") {
    o.find_unused_parameters = true;
    check_parity(*this, o, 3);
  }
  SECTION("static_graph") {
    o.static_graph = true;
    check_parity(*this, o, 3);
  }
  SECTION("mixed precision: reduce in float64") {
    o.mixed_precision.reduce_dtype = DType::Float64;
    o.gradient_as_bucket_view = true;  // cannot be views of float64 buckets: copies instead
    check_parity(*this, o, 3);
  }
}

// Without gradient_as_bucket_view a gradient the backward created becomes its bucket slot, and the bucket
// takes a new buffer: the gradients a caller kept from one step must not change in the next. A .grad that
// existed before backward keeps its tensor and gets the values copied in (PyTorch's copy_).
TEST_CASE_METHOD(MpFixture, "ddp: CPU buckets are reduced through the group's shared memory", "[ddp][shared]") {
  // A group that takes the shared path at any size; the model's 720 parameters make one bucket under the
  // default cap, so each iteration is exactly one allreduce, and each must go through the pool.
  GroupOptions go;
  go.shared_memory_min_bytes = 0;
  auto pg = make_group(go);
  auto* q = dynamic_cast<collectives::EngineProcessGroup*>(pg.get());
  REQUIRE(q != nullptr);
  DDPOptions o;
  o.process_group = pg;
  SECTION("default") { check_parity(*this, o, 3); }
  SECTION("gradient_as_bucket_view") {
    o.gradient_as_bucket_view = true;
    check_parity(*this, o, 3);
  }
  CHECK(q->engine_count("shm", "pool_allreduce") == 3);
}

TEST_CASE_METHOD(MpFixture, "ddp: gradients written back without the view are the caller's to keep", "[ddp]") {
  const int ws = size(), r = rank();
  DDPOptions o;
  o.process_group = shared_group();
  o.bucket_cap_mb = 0.001;
  auto local = std::make_shared<ParityNet>(7);
  auto vanilla = std::make_shared<ParityNet>(7);
  DistributedDataParallel ddp(local, o);
  const auto step = [&](int it) {
    Generator gen(99 + static_cast<uint64_t>(it));
    const Tensor input = rand({ws * 2, 2}, {}, &gen);
    const Tensor target = rand({ws * 2, 4}, {}, &gen);
    autograd::backward(autograd::mse_loss(vanilla->forward(input), target));
    autograd::backward(autograd::mse_loss(ddp.forward(input.slice(0, 2 * r, 2 * r + 2)),
                                          target.slice(0, 2 * r, 2 * r + 2)));
  };
  const auto grads = [](nn::Module& m) {
    std::vector<Tensor> out;
    for (const auto& p : m.parameters()) out.push_back(autograd::grad(p));
    return out;
  };
  for (int it = 0; it < 3; ++it) {  // the first iterations build and rebuild the buckets
    INFO("iteration " << it);
    step(it);
    const std::vector<Tensor> kept = grads(*local);
    std::vector<Tensor> values;
    for (const Tensor& g : kept) values.push_back(g.clone());
    vanilla->zero_grad(true);
    local->zero_grad(true);  // .grad = None: the next backward's gradients are new tensors
    step(it + 10);
    const std::vector<Tensor> now = grads(*local), want = grads(*vanilla);
    for (size_t i = 0; i < kept.size(); ++i) {
      INFO("parameter " << i);
      CHECK(equal(kept[i], values[i]));
      CHECK(now[i].data_ptr() != kept[i].data_ptr());
      CHECK(allclose(now[i], want[i], 1e-5, 1e-7));
    }
    vanilla->zero_grad(true);
    local->zero_grad(true);
  }
  SECTION("a .grad that exists before backward keeps its tensor") {
    step(20);
    local->zero_grad(false);
    vanilla->zero_grad(false);
    const std::vector<Tensor> before = grads(*local);
    step(21);
    const std::vector<Tensor> after = grads(*local), want = grads(*vanilla);
    for (size_t i = 0; i < before.size(); ++i) {
      INFO("parameter " << i);
      CHECK(after[i].data_ptr() == before[i].data_ptr());
      CHECK(allclose(after[i], want[i], 1e-5, 1e-7));
    }
  }
}

TEST_CASE_METHOD(MpFixture, "ddp: mixed precision reduces in bfloat16 and casts buffers", "[ddp]") {
  struct WithBuffer : nn::Module {
    WithBuffer() : nn::Module("B") {
      w = register_parameter("w", full({64}, 1.0));
      b = register_buffer("b", zeros({2}, DType::Float64));
    }
    Tensor forward(const Tensor& x) override { return autograd::mul(w, x); }
    Tensor w, b;
  };
  auto model = std::make_shared<WithBuffer>();
  DDPOptions o;
  o.process_group = shared_group();
  o.mixed_precision.reduce_dtype = DType::BFloat16;
  o.mixed_precision.buffer_dtype = DType::Float32;
  DistributedDataParallel ddp(model, o);
  CHECK(model->b.dtype() == DType::Float32);
  // Gradient r + 1 per element on rank r; the average (ws + 1) / 2 is exact in bfloat16 for small ws.
  autograd::backward(autograd::sum(ddp.forward(full({64}, static_cast<double>(rank() + 1)))));
  const Tensor g = autograd::grad(model->w);
  CHECK(g.dtype() == DType::Float32);
  CHECK(allclose(g, full({64}, (size() + 1) / 2.0), 1e-2, 0));
}

TEST_CASE_METHOD(MpFixture, "ddp: buckets are one per dtype first, rebuilt once in ready order", "[ddp]") {
  auto model = std::make_shared<ParityNet>(3);
  DDPOptions o;
  o.process_group = shared_group();
  o.bucket_cap_mb = 0.001;
  DistributedDataParallel ddp(model, o);
  CHECK(ddp.reducer().bucket_indices() == std::vector<std::vector<size_t>>{{0, 1, 2}});
  const Tensor x = ones({2, 2});
  for (int it = 0; it < 3; ++it) autograd::backward(autograd::sum(ddp.forward(x)));
  const auto stats = ddp.logging_data();
  CHECK(stats.iteration == 3);
  CHECK(stats.rebuilds == 1);
  // Rebuilt in ready order (fc3, fc2, fc1): all 2880 bytes fit the first bucket's 1 MiB.
  CHECK(ddp.reducer().bucket_indices() == std::vector<std::vector<size_t>>{{2, 1, 0}});
  CHECK(stats.comm_hook == "builtin allreduce");
}

TEST_CASE_METHOD(MpFixture, "ddp: rebuilt buckets saved and restored into a new DDP, which then rebuilds nothing", "[ddp]") {
  auto model = std::make_shared<ParityNet>(3);
  DDPOptions o;
  o.process_group = shared_group();
  o.bucket_cap_mb = 0.001;
  DistributedDataParallel ddp(model, o);
  CHECK_FALSE(ddp.rebuilt_buckets().has_value());  // before the first iteration's rebuild
  const Tensor x = ones({2, 2});
  for (int it = 0; it < 2; ++it) autograd::backward(autograd::sum(ddp.forward(x)));
  const auto saved = ddp.rebuilt_buckets();
  REQUIRE(saved.has_value());
  // A checkpoint's new DDP (a resumed job) takes them and keeps them: no rebuild, no broadcast.
  auto model2 = std::make_shared<ParityNet>(3);
  DistributedDataParallel resumed(model2, o);
  resumed.restore_rebuilt_buckets(*saved);
  for (int it = 0; it < 2; ++it) autograd::backward(autograd::sum(resumed.forward(x)));
  CHECK(resumed.reducer().bucket_indices() == *saved);
  CHECK(resumed.logging_data().rebuilds == 0);
  // Buckets of another model are refused, and the DDP keeps its own.
  CHECK_THROWS_WITH(resumed.restore_rebuilt_buckets({{0, 1}}), Catch::Contains("hold 2 parameters, the model has 3"));
  CHECK_THROWS_WITH(resumed.restore_rebuilt_buckets({{0, 1, 1}}), Catch::Contains("appears twice"));
  CHECK(resumed.reducer().bucket_indices() == *saved);
}

TEST_CASE_METHOD(MpFixture, "ddp: no_sync accumulates locally, the next synced step reduces the sum", "[ddp]") {
  const int r = rank(), ws = size();
  auto model = std::make_shared<Task>();
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  const Tensor x = full({2, 2}, static_cast<double>(r));
  {
    auto guard = ddp.no_sync();
    autograd::backward(autograd::sum(autograd::mul(ddp.forward(x), static_cast<double>(r + 1))));
  }
  CHECK(ddp.require_backward_grad_sync());
  // Local only: (r + 1) per element.
  CHECK(equal(autograd::grad(model->p), full({2, 2}, static_cast<double>(r + 1))));
  autograd::backward(autograd::sum(autograd::mul(ddp.forward(x), static_cast<double>(r + 1))));
  // Synced: the average over ranks of 2 (r + 1) = (ws + 1).
  CHECK(allclose(autograd::grad(model->p), full({2, 2}, static_cast<double>(ws + 1))));
}

TEST_CASE_METHOD(MpFixture, "ddp: sparse EmbeddingBag gradients are reduced sparse", "[ddp]") {
  const int r = rank(), ws = size();
  Generator gen(1337);
  auto vanilla = std::make_shared<nn::EmbeddingBag>(10, 10, nn::EmbeddingBagMode::Mean, true, &gen);
  Generator gen2(1337);
  auto local = std::make_shared<nn::EmbeddingBag>(10, 10, nn::EmbeddingBagMode::Mean, true, &gen2);
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(local, o);
  Generator data(42);
  const Tensor input = randint(0, 10, {2 * ws, 2}, DType::Int64, &data);
  const Tensor target = randint(0, 10, {2 * ws}, DType::Int64, &data);
  autograd::backward(autograd::cross_entropy(autograd::softmax(vanilla->forward(input), 1), target));
  const Tensor mine = input.slice(0, 2 * r, 2 * r + 2);
  autograd::backward(autograd::cross_entropy(autograd::softmax(ddp.forward(mine), 1), target.slice(0, 2 * r, 2 * r + 2)));
  const Tensor dg = autograd::grad(local->weight());
  REQUIRE(dg.defined());
  CHECK(dg.is_sparse());
  CHECK(allclose(dg.sparse().to_dense(), autograd::grad(vanilla->weight()).sparse().to_dense(), 1e-5, 1e-7));
}

TEST_CASE_METHOD(MpFixture, "ddp: an unused parameter without find_unused_parameters fails the next iteration",
                 "[ddp]") {
  auto model = std::make_shared<ParityNet>(5, /*with_unused=*/true);
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  autograd::backward(autograd::sum(ddp.forward(ones({2, 2}))));
  CHECK_THROWS_WITH(ddp.forward(ones({2, 2})),
                    Catch::Contains("Expected to have finished reduction in the prior iteration") &&
                        Catch::Contains("unused.weight"));
  CHECK(ddp.logging_data().has_error);
}

TEST_CASE_METHOD(MpFixture, "ddp: globally unused parameters keep no grad, locally unused get the average",
                 "[ddp]") {
  // torch's test_global_local_unused_params_grad: rank 0 uses t0, the others t1; task_unused nowhere.
  if (size() < 2) return;
  struct Tasks : nn::Module {
    Tasks() : nn::Module("Tasks") {
      t0 = register_module("t0", std::make_shared<Task>());
      t1 = register_module("t1", std::make_shared<Task>());
      unused = register_module("task_unused", std::make_shared<Task>());
    }
    std::shared_ptr<Task> t0, t1, unused;
    int rank = 0;
    Tensor forward(const Tensor& x) override { return rank == 0 ? t0->forward(x) : t1->forward(x); }
  };
  for (bool as_view : {false, true}) {
    INFO("gradient_as_bucket_view " << as_view);
    auto model = std::make_shared<Tasks>();
    model->rank = rank();
    DDPOptions o;
    o.process_group = shared_group();
    o.find_unused_parameters = true;
    o.gradient_as_bucket_view = as_view;
    DistributedDataParallel ddp(model, o);
    autograd::backward(autograd::mean(ddp.forward(full({2, 2}, 8.0))));
    CHECK(autograd::grad(model->t0->p).defined());
    CHECK(autograd::grad(model->t1->p).defined());
    CHECK_FALSE(autograd::grad(model->unused->p).defined());
    // mean over 4 elements gives 0.25 each on the rank that used the task; averaged over ws ranks.
    const double t0 = 0.25 / size();
    const double t1 = 0.25 * (size() - 1) / size();
    CHECK(allclose(autograd::grad(model->t0->p), full({2, 2}, t0)));
    CHECK(allclose(autograd::grad(model->t1->p), full({2, 2}, t1)));
  }
}
