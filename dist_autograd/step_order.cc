#include "dist_autograd/step_order.h"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "base/check.h"
#include "base/error.h"
#include "base/logging.h"

namespace braid::dist_autograd {

using rpc::Value;

Value encode_step_turn(const StepTurn& turn) {
  return rpc::tuple({Value(turn.step), Value(turn.microbatch), Value(turn.participant), Value(turn.num_participants),
                     Value(turn.num_microbatches)});
}

StepTurn decode_step_turn(const Value& value) {
  const rpc::ValueList& t = value.as_tuple();
  BRAID_CHECK_ARG(t.size() == 5, "step turn: expected (step, microbatch, participant, num_participants, "
                                 "num_microbatches), got {} values", t.size());
  return {.step = t[0].as_int(), .microbatch = static_cast<int>(t[1].as_int()),
          .participant = static_cast<int>(t[2].as_int()), .num_participants = static_cast<int>(t[3].as_int()),
          .num_microbatches = static_cast<int>(t[4].as_int())};
}

StepOrder& StepOrder::instance() {
  static StepOrder order;
  return order;
}

namespace {

struct Reply {
  Future<Value> future;
  std::optional<Value> value;
  std::exception_ptr error;
};

// Outside mu_: completing a future runs its callbacks inline. One that throws must not stop the others,
// nor leave the order stuck with running_ set.
void complete(std::vector<Reply>& replies) {
  for (auto& r : replies) {
    try {
      if (r.error) {
        r.future.set_error(r.error);
      } else {
        r.future.set_value(std::move(*r.value));
      }
    } catch (const std::exception& e) {
      logging::get("braid.dist_autograd")->error("ordered optimizer step: a reply's callback failed: {}", e.what());
    }
  }
  replies.clear();
}

}  // namespace

int StepOrder::participants_locked(int microbatch) const {
  int n = 0;
  for (int c : counts_) {
    if (c == 0) return -1;
    if (c > microbatch) ++n;
  }
  return n;
}

std::optional<StepOrder::Due> StepOrder::next_due_locked() {
  for (auto& [m, round] : rounds_) {
    const int n = participants_locked(m);
    if (n < 0 || static_cast<int>(round.entries.size()) < n) continue;  // someone is still in its backward
    for (auto& [p, entry] : round.entries) {
      if (entry.stepped || !entry.step) continue;
      return Due{m, p, std::exchange(entry.step, nullptr)};
    }
  }
  return std::nullopt;
}

Future<Value> StepOrder::submit(const StepTurn& turn, StepFn step) {
  BRAID_CHECK_ARG(step != nullptr, "ordered optimizer step: no step function");
  BRAID_CHECK_ARG(turn.num_participants >= 1 && turn.participant >= 0 && turn.participant < turn.num_participants,
                  "ordered optimizer step: participant {} of {}", turn.participant, turn.num_participants);
  BRAID_CHECK_ARG(turn.num_microbatches >= 1 && turn.microbatch >= 0 && turn.microbatch < turn.num_microbatches,
                  "ordered optimizer step: micro-batch {} of {}", turn.microbatch, turn.num_microbatches);
  Future<Value> reply("ordered optimizer step");
  std::vector<Reply> superseded;
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_ || turn.step != step_) {
    // The first turn of a new step: the previous one is over everywhere. What is left of it (a participant
    // that failed before stepping) can no longer happen.
    for (auto& [m, round] : rounds_) {
      for (auto& [p, entry] : round.entries) {
        if (entry.reply.completed()) continue;
        superseded.push_back({entry.reply, std::nullopt,
                              std::make_exception_ptr(InvalidArgument(fmt::format(
                                  "ordered optimizer step: step {} micro-batch {} of participant {} did not run: "
                                  "step {} began first",
                                  step_, m, p, turn.step)))});
      }
    }
    started_ = true;
    step_ = turn.step;
    num_participants_ = turn.num_participants;
    counts_.assign(static_cast<size_t>(num_participants_), 0);
    rounds_.clear();
  }
  auto check = [&](bool ok, const std::string& why) {
    if (ok) return;
    lock.unlock();
    complete(superseded);
    BRAID_THROW(InvalidArgument, "ordered optimizer step: step {} micro-batch {} of participant {}: {}", turn.step,
                turn.microbatch, turn.participant, why);
  };
  check(turn.num_participants == num_participants_,
        fmt::format("{} participants, but this step has {}", turn.num_participants, num_participants_));
  int& count = counts_[static_cast<size_t>(turn.participant)];
  check(count == 0 || count == turn.num_microbatches,
        fmt::format("{} micro-batches, but it told {} before", turn.num_microbatches, count));
  Round& round = rounds_[turn.microbatch];
  check(round.entries.count(turn.participant) == 0, "submitted twice");
  count = turn.num_microbatches;
  round.entries.emplace(turn.participant, Entry{std::move(step), reply, std::nullopt, nullptr, false});
  if (!superseded.empty()) {
    lock.unlock();
    complete(superseded);
    lock.lock();
  }
  // One thread runs the due steps; if another is at it, it sees this turn before it stops (both under mu_).
  if (!running_) {
    running_ = true;
    drain(lock);
    running_ = false;
  }
  return reply;
}

void StepOrder::drain(std::unique_lock<std::mutex>& lock) {
  std::vector<Reply> finished;
  while (std::optional<Due> due = next_due_locked()) {
    std::optional<Value> value;
    std::exception_ptr error;
    lock.unlock();
    try {
      value = due->step();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    // The round is still there: a new step begins only after every reply of this one.
    auto round = rounds_.find(due->microbatch);
    if (round == rounds_.end()) continue;
    auto entry = round->second.entries.find(due->participant);
    if (entry == round->second.entries.end()) continue;
    entry->second.stepped = true;
    entry->second.value = std::move(value);
    entry->second.error = error;
    ++round->second.stepped;
    if (round->second.stepped == participants_locked(due->microbatch)) {
      for (auto& [p, e] : round->second.entries) finished.push_back({e.reply, std::move(e.value), e.error});
      lock.unlock();
      complete(finished);
      lock.lock();
    }
  }
}

}  // namespace braid::dist_autograd
