// StepOrder: the order, kept by the owner of the parameters, in which the steps of several
// DistributedOptimizers over the same parameters are applied.
//
// Several participants (braid run's trainers, each with its own DistributedOptimizer over the same remote
// modules, as a parameter server's clients) step the same parameters once per micro-batch. Applied as they
// arrive, their updates would land in any order, and one participant's backward or next forward could see
// another's update of the same micro-batch: results would change from run to run. So the owner applies
// them in turn, per (step, micro-batch):
//
//   - a participant's step waits until every participant of the micro-batch has submitted its own (it has
//     finished its backward: it submits after it) and every participant before it (by index) has stepped;
//   - its reply comes once every participant of the micro-batch has stepped, so that no participant's next
//     forward sees a half-updated parameter.
//
// The participants of micro-batch m are those that run more than m micro-batches in the step (counts may
// differ, as with uneven inputs under DDP's join()); each tells its count with every turn, so the list of
// micro-batch m is known once every participant has submitted a turn of the step.
//
// Nothing blocks while waiting: submit() returns a Future, and a step runs on the thread whose submission
// (or step) made it due. One thread at a time runs the due steps, in order; the others return at once. An
// owner serving these steps as an RPC async method (LocalOptimizer's "step_in_turn") therefore holds no
// RPC thread while a participant waits.
//
// A turn of a new step starts that step: the caller's steps are sequential (every participant has had its
// replies of the previous step before anyone submits a turn of the next), and anything still pending of the
// previous step fails. The steps of one process form one order: every ordered step there belongs to the
// same group of participants (in braid run, a worker serves one job).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "base/future.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

// Where one participant's optimizer step stands.
struct StepTurn {
  int64_t step = 0;          // the training step; a new value starts a new step
  int microbatch = 0;        // 0 .. num_microbatches-1
  int participant = 0;       // its place in the order, 0 .. num_participants-1 (braid run: the trainer index)
  int num_participants = 1;  // how many participants share the parameters
  int num_microbatches = 1;  // micro-batches this participant runs in `step`
};

// As an RPC argument: a tuple of the five fields, in the struct's order.
rpc::Value encode_step_turn(const StepTurn& turn);
// The inverse; InvalidArgument for anything else.
StepTurn decode_step_turn(const rpc::Value& value);

class StepOrder {
 public:
  using StepFn = std::function<rpc::Value()>;

  // The process's order, which the LocalOptimizers' "step_in_turn" go through.
  static StepOrder& instance();

  // Runs `step` in its turn. The future completes once every participant of the micro-batch has stepped,
  // with `step`'s result or its exception. InvalidArgument (thrown here, nothing queued) for a turn out of
  // range, one that disagrees with the step's participant count or with the count the participant told
  // earlier, or a second turn of the same participant and micro-batch.
  Future<rpc::Value> submit(const StepTurn& turn, StepFn step);

 private:
  struct Entry {
    StepFn step;  // moved out when it runs
    Future<rpc::Value> reply;
    std::optional<rpc::Value> value;
    std::exception_ptr error;
    bool stepped = false;
  };
  struct Round {
    std::map<int, Entry> entries;  // by participant
    int stepped = 0;
  };
  struct Due {
    int microbatch;
    int participant;
    StepFn step;
  };

  // Participants of micro-batch m of the current step; -1 while not every participant has told its count.
  int participants_locked(int microbatch) const;
  // The next step to run: the first participant (by index) that has not stepped, in a round that everyone
  // has reached. Its function is moved out.
  std::optional<Due> next_due_locked();
  // Runs the due steps, one after another, until none is; `lock` is held on entry and on return, released
  // while a step runs and while replies are completed (their callbacks, e.g. the RPC agent's reply or a
  // caller that submits its next turn, must not run under mu_).
  void drain(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  bool started_ = false;         // GUARDED_BY(mu_): a step has begun
  int64_t step_ = 0;             // GUARDED_BY(mu_)
  int num_participants_ = 0;     // GUARDED_BY(mu_)
  std::vector<int> counts_;      // GUARDED_BY(mu_): micro-batches per participant this step (0: not told yet)
  std::map<int, Round> rounds_;  // GUARDED_BY(mu_): by micro-batch, this step
  bool running_ = false;         // GUARDED_BY(mu_): a thread is in drain()
};

}  // namespace braid::dist_autograd
