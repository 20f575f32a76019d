#include "runtime/run/remote_step_turns.h"

#include <algorithm>

#include "base/check.h"
#include "rpc/api.h"

namespace braid::runtime {

using rpc::Args;
using rpc::Value;

RemoteStepTurns& RemoteStepTurns::instance() {
  static RemoteStepTurns turns;
  return turns;
}

void RemoteStepTurns::configure(int num_trainers) {
  std::lock_guard<std::mutex> lock(mu_);
  num_trainers_ = num_trainers;
  step_ = -1;
  counts_.assign(static_cast<size_t>(num_trainers), 0);
  rounds_.clear();
}

int RemoteStepTurns::participants(int microbatch) const {
  int n = 0;
  for (int c : counts_) {
    if (c == 0) return -1;
    if (c > microbatch) ++n;
  }
  return n;
}

void RemoteStepTurns::advance(Round& round, int microbatch, std::vector<Future<Value>>& due) {
  const int n = participants(microbatch);
  if (n < 0 || static_cast<int>(round.arrived.size()) < n) return;
  // Everyone is here: the first participant (in trainer order) that has not stepped yet may go.
  std::vector<int> order = round.arrived;
  std::sort(order.begin(), order.end());
  for (int t : order) {
    if (std::find(round.stepped.begin(), round.stepped.end(), t) != round.stepped.end()) continue;
    auto it = round.waiting.find(t);
    if (it != round.waiting.end()) {
      due.push_back(it->second);
      round.waiting.erase(it);
    }
    break;  // the next one goes after this one's done()
  }
  if (static_cast<int>(round.stepped.size()) == n) {
    for (auto& f : round.finishing) due.push_back(f);
    round.finishing.clear();
  }
}

namespace {

// Outside mu_ (see advance()).
void complete_all(const std::vector<Future<Value>>& due) {
  for (const auto& f : due) f.set_value(Value());
}

}  // namespace

Future<Value> RemoteStepTurns::request(int64_t step, int microbatch, int trainer, int num_microbatches) {
  Future<Value> turn("remote step turn");
  std::vector<Future<Value>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    BRAID_CHECK_ARG(trainer >= 0 && trainer < num_trainers_, "braid.turn: trainer {} of {}", trainer, num_trainers_);
    if (step != step_) {  // the first request of a new step: the previous step is over everywhere
      step_ = step;
      std::fill(counts_.begin(), counts_.end(), 0);
      rounds_.clear();
    }
    counts_[static_cast<size_t>(trainer)] = num_microbatches;
    Round& round = rounds_[microbatch];
    round.waiting.emplace(trainer, turn);
    round.arrived.push_back(trainer);
    // A new count may complete the participant list of every round of this step.
    for (auto& [m, r] : rounds_) advance(r, m, due);
  }
  complete_all(due);
  return turn;
}

Future<Value> RemoteStepTurns::done(int64_t step, int microbatch, int trainer) {
  Future<Value> finished("remote steps of a micro-batch");
  std::vector<Future<Value>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    BRAID_CHECK_ARG(step == step_, "braid.turn_done: step {} while step {} is running", step, step_);
    Round& round = rounds_[microbatch];
    round.stepped.push_back(trainer);
    round.finishing.push_back(finished);
    advance(round, microbatch, due);
  }
  complete_all(due);
  return finished;
}

void register_turn_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = rpc::global_registry();
    r.add_async_function("braid.turn", [](const Args& a) {
      return RemoteStepTurns::instance().request(a.at(0).as_int(), static_cast<int>(a.at(1).as_int()),
                                                 static_cast<int>(a.at(2).as_int()), static_cast<int>(a.at(3).as_int()));
    });
    r.add_async_function("braid.turn_done", [](const Args& a) {
      return RemoteStepTurns::instance().done(a.at(0).as_int(), static_cast<int>(a.at(1).as_int()),
                                              static_cast<int>(a.at(2).as_int()));
    });
  });
}

}  // namespace braid::runtime
