// The driver's turns for the remote parts' optimizer steps (remote_step_turns.h): every participant's
// backward first, then the steps in trainer order, and nobody past a micro-batch before all have stepped.
#include <catch2/catch.hpp>

#include "runtime/run/remote_step_turns.h"

namespace braid::runtime {
namespace {

TEST_CASE("run: remote step turns go in trainer order once every participant has arrived", "[runtime][run]") {
  RemoteStepTurns& turns = RemoteStepTurns::instance();
  turns.configure(3);
  // Step 1, one micro-batch each; trainer 2 arrives first, trainer 0 last.
  auto t2 = turns.request(1, 0, 2, 1);
  auto t1 = turns.request(1, 0, 1, 1);
  CHECK(!t2.completed());
  CHECK(!t1.completed());  // trainer 0 has not finished its backward yet
  auto t0 = turns.request(1, 0, 0, 1);
  CHECK(t0.completed());
  CHECK(!t1.completed());
  auto d0 = turns.done(1, 0, 0);
  CHECK(!d0.completed());  // the others have not stepped
  CHECK(t1.completed());
  CHECK(!t2.completed());
  auto d1 = turns.done(1, 0, 1);
  CHECK(t2.completed());
  auto d2 = turns.done(1, 0, 2);
  CHECK(d0.completed());
  CHECK(d1.completed());
  CHECK(d2.completed());
}

TEST_CASE("run: with uneven micro-batches only the trainers that have one take part", "[runtime][run]") {
  RemoteStepTurns& turns = RemoteStepTurns::instance();
  turns.configure(2);
  // Trainer 0 has one micro-batch, trainer 1 two: micro-batch 1 has trainer 1 alone.
  auto a0 = turns.request(7, 0, 0, 1);
  CHECK(!a0.completed());
  auto a1 = turns.request(7, 0, 1, 2);
  CHECK(a0.completed());
  turns.done(7, 0, 0);
  CHECK(a1.completed());
  auto d1 = turns.done(7, 0, 1);
  CHECK(d1.completed());
  auto b1 = turns.request(7, 1, 1, 2);
  CHECK(b1.completed());  // alone in micro-batch 1
  CHECK(turns.done(7, 1, 1).completed());
}

TEST_CASE("run: a turn's callbacks run outside the turns' lock and may ask for the next turn", "[runtime][run]") {
  // Completing a turn runs its callbacks inline: the RPC agent's reply, or (here) a continuation that
  // steps and says so at once. Completed under the turns' mutex, this done() would lock it again.
  RemoteStepTurns& turns = RemoteStepTurns::instance();
  turns.configure(2);
  auto t1 = turns.request(3, 0, 1, 1);
  Future<rpc::Value> d1;
  t1.add_callback([&](const Future<rpc::Value>&) { d1 = turns.done(3, 0, 1); });
  auto t0 = turns.request(3, 0, 0, 1);
  CHECK(t0.completed());
  CHECK(!t1.completed());
  auto d0 = turns.done(3, 0, 0);  // grants trainer 1's turn, whose callback reports its step
  CHECK(t1.completed());
  CHECK(d1.completed());
  CHECK(d0.completed());
}

}  // namespace
}  // namespace braid::runtime
