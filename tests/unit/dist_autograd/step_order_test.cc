// The order the owner of shared parameters applies several DistributedOptimizers' steps in
// (dist_autograd/step_order.h): every participant of a micro-batch submits first, then the steps run in
// participant order, and no reply comes before every participant has stepped. Then the same through RPC:
// two DistributedOptimizers over one RemoteModule, stepping in turn.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops/reduce.h"
#include "base/error.h"
#include "dist_autograd/context.h"
#include "dist_autograd/dist_optimizer.h"
#include "dist_autograd/hosted_module.h"
#include "dist_autograd/remote_module.h"
#include "dist_autograd/step_order.h"
#include "tensor/compare.h"
#include "tensor/factory.h"
#include "tests/unit/dist_autograd/solo_rpc.h"

namespace braid::dist_autograd {

using rpc::Value;

namespace {

Tensor mat(std::vector<float> values, Shape shape) { return from_vector(values, shape); }

StepTurn turn(int64_t step, int microbatch, int participant, int num_participants, int num_microbatches) {
  return {.step = step, .microbatch = microbatch, .participant = participant, .num_participants = num_participants,
          .num_microbatches = num_microbatches};
}

// A step that records who ran, in `log`, and returns the participant.
StepOrder::StepFn record(std::vector<std::string>& log, const std::string& name, int64_t result) {
  return [&log, name, result] {
    log.push_back(name);
    return Value(result);
  };
}

}  // namespace

TEST_CASE("step order: steps wait for every participant, then go in participant order, and replies wait for all",
          "[step_order]") {
  StepOrder order;
  std::vector<std::string> log;
  // Step 1, one micro-batch each; participant 2 arrives first, participant 0 last.
  auto r2 = order.submit(turn(1, 0, 2, 3, 1), record(log, "p2", 2));
  auto r1 = order.submit(turn(1, 0, 1, 3, 1), record(log, "p1", 1));
  CHECK(log.empty());  // participant 0 has not finished its backward yet
  CHECK(!r2.completed());
  CHECK(!r1.completed());
  auto r0 = order.submit(turn(1, 0, 0, 3, 1), record(log, "p0", 0));
  CHECK(log == std::vector<std::string>{"p0", "p1", "p2"});
  REQUIRE(r0.completed());
  CHECK(r0.value().as_int() == 0);
  CHECK(r1.value().as_int() == 1);
  CHECK(r2.value().as_int() == 2);
}

TEST_CASE("step order: the next micro-batch waits for this one, and no reply comes before the last step",
          "[step_order]") {
  StepOrder order;
  std::vector<std::string> log;
  std::vector<Future<Value>> replies;
  // Participant 1's step of micro-batch 0 does not finish at once: its step function runs only when asked.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  replies.push_back(order.submit(turn(5, 0, 1, 2, 2), [&] {
    log.push_back("p1 m0");
    return Value(int64_t{1});
  }));
  std::thread slow([&] {
    // Participant 0 arrives from another thread: its submission runs p0's step, then p1's.
    replies.insert(replies.begin(), order.submit(turn(5, 0, 0, 2, 2), [&] {
      released.wait();
      log.push_back("p0 m0");
      return Value(int64_t{0});
    }));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(log.empty());  // p0's step is under way, and p1 goes after it
  release.set_value();
  slow.join();
  REQUIRE(replies.size() == 2);
  CHECK(log == std::vector<std::string>{"p0 m0", "p1 m0"});
  CHECK(replies[0].completed());
  CHECK(replies[1].completed());

  // Micro-batch 1: participant 1 steps and waits for participant 0's step before it hears back.
  auto b1 = order.submit(turn(5, 1, 1, 2, 2), record(log, "p1 m1", 1));
  CHECK(log.size() == 2);
  CHECK(!b1.completed());
  auto b0 = order.submit(turn(5, 1, 0, 2, 2), record(log, "p0 m1", 0));
  CHECK(log == std::vector<std::string>{"p0 m0", "p1 m0", "p0 m1", "p1 m1"});
  CHECK(b0.completed());
  CHECK(b1.completed());
}

TEST_CASE("step order: with uneven micro-batch counts only the participants that have one take part",
          "[step_order]") {
  // data.uneven: participants 0 and 1 run one micro-batch, 2 and 3 run two.
  StepOrder order;
  std::vector<std::string> log;
  auto a3 = order.submit(turn(7, 0, 3, 4, 2), record(log, "p3 m0", 3));
  auto a0 = order.submit(turn(7, 0, 0, 4, 1), record(log, "p0 m0", 0));
  auto a2 = order.submit(turn(7, 0, 2, 4, 2), record(log, "p2 m0", 2));
  CHECK(log.empty());  // participant 1's count is not known: micro-batch 0's list is not complete
  auto a1 = order.submit(turn(7, 0, 1, 4, 1), record(log, "p1 m0", 1));
  CHECK(log == std::vector<std::string>{"p0 m0", "p1 m0", "p2 m0", "p3 m0"});
  CHECK((a0.completed() && a1.completed() && a2.completed() && a3.completed()));
  // Micro-batch 1 has participants 2 and 3 alone.
  auto b3 = order.submit(turn(7, 1, 3, 4, 2), record(log, "p3 m1", 3));
  CHECK(!b3.completed());
  CHECK(log.size() == 4);
  auto b2 = order.submit(turn(7, 1, 2, 4, 2), record(log, "p2 m1", 2));
  CHECK(log == std::vector<std::string>{"p0 m0", "p1 m0", "p2 m0", "p3 m0", "p2 m1", "p3 m1"});
  CHECK(b2.completed());
  CHECK(b3.completed());

  // The next step starts afresh: counts of step 7 are forgotten.
  auto c0 = order.submit(turn(8, 0, 0, 4, 1), record(log, "s8 p0", 0));
  CHECK(!c0.completed());
  for (int p = 1; p < 4; ++p) order.submit(turn(8, 0, p, 4, 1), record(log, "s8 p" + std::to_string(p), p));
  CHECK(c0.completed());
  CHECK(log.back() == "s8 p3");
}

TEST_CASE("step order: a reply's callback may submit the next turn, and a failed step fails only its reply",
          "[step_order]") {
  // Completing a reply runs its callbacks inline (the RPC agent's reply, or here a continuation that submits
  // the participant's next micro-batch at once): under the order's mutex, that would deadlock.
  StepOrder order;
  std::vector<std::string> log;
  Future<Value> next;
  auto a1 = order.submit(turn(3, 0, 1, 2, 2), [&]() -> Value { throw InvalidArgument("no gradients"); });
  a1.add_callback([&](const Future<Value>&) { next = order.submit(turn(3, 1, 1, 2, 2), record(log, "p1 m1", 1)); });
  auto a0 = order.submit(turn(3, 0, 0, 2, 2), record(log, "p0 m0", 0));
  REQUIRE(a0.completed());
  REQUIRE(a1.completed());
  CHECK(a0.value().as_int() == 0);
  CHECK_THROWS_WITH(a1.value(), Catch::Contains("no gradients"));
  REQUIRE(next.completed() == false);  // micro-batch 1 waits for participant 0
  auto b0 = order.submit(turn(3, 1, 0, 2, 2), record(log, "p0 m1", 0));
  CHECK(log == std::vector<std::string>{"p0 m0", "p0 m1", "p1 m1"});
  CHECK(b0.completed());
  CHECK(next.completed());
}

TEST_CASE("step order: turns that do not fit the step are refused", "[step_order]") {
  StepOrder order;
  std::vector<std::string> log;
  CHECK_THROWS_WITH(order.submit(turn(1, 0, 2, 2, 1), record(log, "x", 0)), Catch::Contains("participant 2 of 2"));
  CHECK_THROWS_WITH(order.submit(turn(1, 1, 0, 2, 1), record(log, "x", 0)), Catch::Contains("micro-batch 1 of 1"));
  auto a0 = order.submit(turn(1, 0, 0, 2, 2), record(log, "p0", 0));
  CHECK_THROWS_WITH(order.submit(turn(1, 0, 1, 3, 1), record(log, "x", 0)),
                    Catch::Contains("3 participants, but this step has 2"));
  CHECK_THROWS_WITH(order.submit(turn(1, 1, 0, 2, 3), record(log, "x", 0)),
                    Catch::Contains("3 micro-batches, but it told 2 before"));
  CHECK_THROWS_WITH(order.submit(turn(1, 0, 0, 2, 2), record(log, "x", 0)), Catch::Contains("submitted twice"));
  CHECK(!a0.completed());
  // A new step fails what is left of the old one.
  auto b0 = order.submit(turn(2, 0, 0, 1, 1), record(log, "s2", 0));
  CHECK(b0.completed());
  CHECK_THROWS_WITH(a0.value(), Catch::Contains("did not run: step 2 began first"));
  CHECK(log == std::vector<std::string>{"s2"});
  const StepTurn t = turn(9, 1, 2, 4, 3);
  const StepTurn back = decode_step_turn(encode_step_turn(t));
  CHECK((back.step == 9 && back.microbatch == 1 && back.participant == 2 && back.num_participants == 4 &&
         back.num_microbatches == 3));
}

// Needs the distributed-autograd core (Context, backward, get_gradients).
TEST_CASE("DistributedOptimizer: steps in turn on the owner, in participant order, through RPC",
          "[dist_optimizer][step_order][core]") {
  testing::SoloRpc job;
  // Two participants (trainers), each with its own DistributedOptimizer over one remote Linear's parameters.
  RemoteModule layer("worker0/cpu", "nn.Linear", {Value(int64_t{2}), Value(int64_t{1}), Value(false)});
  const auto m = local_module(layer.module_rref());
  {
    autograd::NoGradGuard no_grad;
    m->parameter("weight").copy_(mat({1.0f, 2.0f}, {1, 2}));
  }
  nn::optim::SGDOptions sgd;
  sgd.lr = 0.5;
  DistributedOptimizer first(sgd, layer.remote_parameters());
  DistributedOptimizer second(sgd, layer.remote_parameters());
  // Each participant: a backward through the layer, then its step in turn. Participant 1 steps first in
  // time, but its step waits for participant 0's, and participant 1's forward (made before) saw the weights
  // unchanged: both gradients are of the same weights.
  auto run = [&](DistributedOptimizer& opt, int participant, Tensor x) {
    Context ctx;
    backward(ctx.id(), {autograd::sum(layer(x))});
    opt.step(ctx.id(), {.step = 1, .microbatch = 0, .participant = participant, .num_participants = 2,
                        .num_microbatches = 1});
  };
  std::future<void> late = std::async(std::launch::async, [&] { run(second, 1, mat({1.0f, 0.0f}, {1, 2})); });
  CHECK(late.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);  // waits for participant 0
  CHECK(equal(m->parameter("weight"), mat({1.0f, 2.0f}, {1, 2})));
  run(first, 0, mat({0.0f, 2.0f}, {1, 2}));
  late.get();
  // w - 0.5 * [0, 2] - 0.5 * [1, 0]
  CHECK(equal(m->parameter("weight"), mat({0.5f, 1.0f}, {1, 2})));
}

}  // namespace braid::dist_autograd
