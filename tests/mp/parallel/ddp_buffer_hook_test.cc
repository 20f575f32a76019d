// Buffer comm hooks (PyTorch's _register_buffer_comm_hook, test_ddp_buffer_hook_allreduce): a hook that
// all-reduces (sums) the buffers instead of broadcasting rank 0's, before or after the forward, waiting
// itself or returning futures that DDP waits for at the end of backward. The reference is a DDP without
// buffer broadcast whose buffers the test all-reduces by hand at the same point.
#include <chrono>
#include <thread>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "autograd/variable.h"
#include "parallel/ddp/ddp.h"
#include "tensor/compare.h"
#include "tests/mp/support/mp_test.h"

using namespace braid;
using namespace braid::mp;
using parallel::BufferCommHookLocation;
using parallel::DDPOptions;
using parallel::DistributedDataParallel;

namespace {

// The forward reads the buffer (out = w * x + count) and then counts itself (count += 1), so the result
// depends on whether the buffers were reduced before or after it.
class Counting : public nn::Module {
 public:
  explicit Counting(double start) : nn::Module("Counting") {
    w = register_parameter("w", ones({2}));
    count = register_buffer("count", full({1}, start));
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = autograd::add(autograd::mul(w, x), count.clone());
    count.add_(1.0);
    return out;
  }
  Tensor w, count;
};

}  // namespace

TEST_CASE_METHOD(MpFixture, "ddp buffer comm hook: allreduce of the buffers before or after the forward",
                 "[ddp][buffer_hook]") {
  const int r = rank();
  for (auto location : {BufferCommHookLocation::kPreForward, BufferCommHookLocation::kPostForward}) {
    for (bool return_futures : {false, true}) {
      const bool pre = location == BufferCommHookLocation::kPreForward;
      // Before the forward with futures, the forward would read and write the buffers while the hook's
      // allreduce still runs on them: a race (PyTorch's test skips its check there too).
      if (pre && return_futures) continue;
      INFO((pre ? "pre-forward" : "post-forward") << (return_futures ? ", futures" : ", waited in the hook"));
      auto hooked_model = std::make_shared<Counting>(0);
      auto plain_model = std::make_shared<Counting>(0);
      DDPOptions o;
      o.process_group = shared_group();
      DistributedDataParallel hooked(hooked_model, o);
      o.broadcast_buffers = false;
      DistributedDataParallel plain(plain_model, o);
      // Each rank starts from its own count (construction broadcast rank 0's).
      hooked_model->count.fill_(static_cast<double>(r + 1));
      plain_model->count.fill_(static_cast<double>(r + 1));
      int calls = 0;
      auto group = shared_group();
      hooked.register_buffer_comm_hook(
          [&calls, group, return_futures](const std::map<std::string, Tensor>& named) {
            ++calls;
            REQUIRE(named.size() == 1);
            REQUIRE(named.count("count") == 1);
            std::vector<Future<Tensor>> futures;
            for (const auto& [name, buffer] : named) {
              collectives::TensorList list{buffer};
              auto work = group->allreduce(list);
              if (return_futures) {
                Future<Tensor> f("buffer allreduce of " + name);
                const Tensor out = buffer;
                work->get_future().add_callback([f, out](const auto& done) {
                  if (done.has_error()) f.set_error(done.error());
                  else f.set_value(out);
                });
                futures.push_back(f);
              } else {
                work->wait();
              }
            }
            return futures;
          },
          location);
      const auto reduce_by_hand = [&] {
        collectives::TensorList list{plain_model->count};
        group->allreduce(list)->wait();
      };
      const Tensor x = full({2}, 2.0);
      for (int it = 0; it < 2; ++it) {
        INFO("iteration " << it);
        const Tensor hooked_out = hooked.forward(x);
        if (pre) reduce_by_hand();
        const Tensor plain_out = plain.forward(x);
        if (!pre) reduce_by_hand();
        CHECK(allclose(hooked_out, plain_out));
        // Futures are only certain to be done once backward returns.
        if (!return_futures) CHECK(allclose(hooked_model->count, plain_model->count));
        autograd::backward(autograd::sum(hooked_out));
        autograd::backward(autograd::sum(plain_out));
        CHECK(allclose(hooked_model->count, plain_model->count));
        CHECK(allclose(autograd::grad(hooked_model->w), autograd::grad(plain_model->w)));
        hooked_model->zero_grad();
        plain_model->zero_grad();
      }
      CHECK(calls == 2);
      // Under no_sync the buffers are not synchronised: no hook call.
      {
        auto guard = hooked.no_sync();
        autograd::backward(autograd::sum(hooked.forward(x)));
      }
      CHECK(calls == 2);
    }
  }
}

TEST_CASE_METHOD(MpFixture, "ddp buffer comm hook: errors", "[ddp][buffer_hook]") {
  auto model = std::make_shared<Counting>(0);
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  CHECK_THROWS_WITH(ddp.register_buffer_comm_hook(nullptr), Catch::Contains("the hook is empty"));
  auto join = ddp.join();
  CHECK_THROWS_WITH(
      ddp.register_buffer_comm_hook([](const std::map<std::string, Tensor>&) { return std::vector<Future<Tensor>>{}; }),
      Catch::Contains("not supported while a Join is active"));
}

// The returned futures are waited for by the end of backward: one that a thread completes only 200 ms
// later is complete when backward returns (the thread is joined at the end of the scope).
TEST_CASE_METHOD(MpFixture, "ddp buffer comm hook: backward waits for the returned futures", "[ddp][buffer_hook]") {
  auto model = std::make_shared<Counting>(0);
  DDPOptions o;
  o.process_group = shared_group();
  DistributedDataParallel ddp(model, o);
  Future<Tensor> late("late buffer future");
  std::jthread completer;
  ddp.register_buffer_comm_hook([&](const std::map<std::string, Tensor>& named) {
    const Tensor count = named.at("count");
    completer = std::jthread([late, count] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      late.set_value(count);
    });
    return std::vector<Future<Tensor>>{late};
  });
  const Tensor out = ddp.forward(full({2}, 1.0));
  CHECK_FALSE(late.completed());
  autograd::backward(autograd::sum(out));
  CHECK(late.completed());
}
