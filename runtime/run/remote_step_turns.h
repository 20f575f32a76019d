// The order of the remote parts' optimizer steps. Every trainer runs its own DistributedOptimizer over the
// shared remote parts (seed 000's parameter server); left alone, their updates would land on the worker in
// whatever order the trainers' steps arrive, and one trainer's forward could see another's update of the
// same micro-batch: results would differ run to run, and --resume could not reproduce a run.
//
// So the driver hands out turns, per (step, micro-batch). A trainer that has finished its backward of
// micro-batch m asks for its turn ("braid.turn"); the turn comes once every trainer taking part in m has
// finished its backward and every trainer before it (in trainer order) has stepped. After its step it says
// so ("braid.turn_done"), which returns once every participant has stepped, so that no forward of the next
// micro-batch sees a half-updated part. The participants of m are the trainers with more than m
// micro-batches (each tells its count with its first request of the step).
//
// Both are asynchronous RPC functions: a waiting trainer holds no thread of the driver.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "base/future.h"
#include "rpc/value.h"

namespace braid::runtime {

class RemoteStepTurns {
 public:
  static RemoteStepTurns& instance();

  // On the driver, before the first step.
  void configure(int num_trainers);
  // Trainer `trainer` finished the backward of micro-batch `microbatch` of `step` (of `num_microbatches`).
  Future<rpc::Value> request(int64_t step, int microbatch, int trainer, int num_microbatches);
  // It stepped; completes when every participant has.
  Future<rpc::Value> done(int64_t step, int microbatch, int trainer);

 private:
  struct Round {
    std::map<int, Future<rpc::Value>> waiting;  // trainer -> its pending turn
    std::vector<int> arrived;
    std::vector<int> stepped;
    std::vector<Future<rpc::Value>> finishing;  // pending done() answers
  };
  // Participants of micro-batch m of the current step; -1 while not every trainer has told its count.
  int participants(int microbatch) const;
  // Under mu_: moves the turns and done()s that are due out of `round` into `due`. The caller completes
  // them after unlocking: completing a Future runs its callbacks inline (the RPC agent's reply, or a
  // caller's continuation that asks for its next turn), and those must not run under mu_.
  void advance(Round& round, int microbatch, std::vector<Future<rpc::Value>>& due);

  std::mutex mu_;
  int num_trainers_ = 0;        // GUARDED_BY(mu_)
  int64_t step_ = -1;           // GUARDED_BY(mu_)
  std::vector<int> counts_;     // GUARDED_BY(mu_): micro-batches per trainer this step (0: not told yet)
  std::map<int, Round> rounds_;  // GUARDED_BY(mu_): by micro-batch, this step
};

// Registers "braid.turn" and "braid.turn_done" (once per process).
void register_turn_functions();

}  // namespace braid::runtime
