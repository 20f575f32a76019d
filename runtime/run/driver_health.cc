// The driver's watch over the job (driver.h): failing it and blaming a rank, the heartbeat thread, and
// the snapshots the status server answers with. The training loop is in driver.cc.
#include "runtime/run/driver.h"

#include <fmt/format.h>

#include "base/check.h"
#include "collectives/queue/flight_recorder.h"
#include "runtime/run/driver_detail.h"
#include "runtime/run/pause_watch.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/roles.h"

namespace braid::runtime {

using rpc::Value;
using namespace driver_detail;

void Driver::fail(int rank, const std::string& why) {
  std::string message = fmt::format("{} failed: {}", describe_rank(job_, rank), why);
  // A driver that was itself stopped (or starved) wakes to find that others gave up on it: the failure is
  // likely this rank's, and what it then sees its consequence. Both are named.
  if (const std::string paused = PauseWatch::describe_recent(PauseWatch::window_for(job_.failure.timeout_s));
      !paused.empty()) {
    message = fmt::format("{} failed: {}, and the other ranks may have given up on it; then {}",
                          describe_rank(job_, runtime_.rank()), paused, message);
  }
  if (failing_.exchange(true)) {
    // Another thread is already failing the job; it exits the process.
    std::this_thread::sleep_for(ms(job_.failure.timeout_s));
  }
  log()->error("{}", message);
  // Best effort, bounded: the other ranks exit on their own watchdog anyway.
  std::vector<Future<Value>> aborts;
  // The failed rank too: it may be alive (a trainer whose step threw) and would otherwise wait for its
  // watchdog.
  for (int r : other_ranks(runtime_.world_size(), runtime_.rank())) {
    try {
      aborts.push_back(rpc::rpc_async(worker_name(r), "braid.abort", {Value(message)}, rpc::Millis(2000)));
    } catch (const std::exception&) {
    }
  }
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (auto& f : aborts) {
    try {
      f.wait(std::chrono::duration_cast<std::chrono::milliseconds>(std::max(deadline - Clock::now(), Clock::duration{})));
    } catch (const std::exception&) {
    }
  }
  RankService::instance().abort_process(fmt::format("stopping the job: {}", message));
}

void Driver::hold_if_failing() {
  if (!failing_.load()) return;
  // The failing thread ends the process within seconds (fail()); this bound is only a backstop.
  std::this_thread::sleep_for(ms(job_.failure.timeout_s) + std::chrono::seconds(10));
  RankService::instance().abort_process("the job is failing, and the thread failing it did not end the process");
}

int Driver::blame(int rank) const {
  // The agent records a death before it fails the calls pending towards the peer, so a failure those
  // calls caused finds it there; RankService hears of it only after them.
  if (rpc::is_initialized()) {
    for (const auto& [r, why] : rpc::current_agent().dead_peers()) {
      if (r != runtime_.rank()) return r;
    }
  }
  for (const auto& [r, why] : RankService::instance().dead_peers()) {
    if (r != runtime_.rank()) return r;
  }
  return rank;
}

int Driver::find_unreachable_rank() {
  if (const int dead = blame(-1); dead >= 0) return dead;
  std::vector<std::pair<int, Future<Value>>> pings;
  for (int r : other_ranks(runtime_.world_size(), runtime_.rank())) {
    try {
      pings.emplace_back(r, rpc::rpc_async(worker_name(r), "braid.ping", {}, rpc::Millis(2000)));
    } catch (const std::exception&) {
      return r;
    }
  }
  for (auto& [r, f] : pings) {
    try {
      f.value(rpc::Millis(3000));
    } catch (const std::exception&) {
      return r;
    }
  }
  return -1;
}

void Driver::heartbeat_loop() {
  const auto period = ms(job_.failure.heartbeat_s);
  // A ping, and the wait before the next, fit in failure.timeout_s: a rank that hangs is found in time.
  const auto bound = std::max(ms(job_.failure.timeout_s) - 2 * period, rpc::Millis(1000));
  const std::vector<int> ranks = other_ranks(runtime_.world_size(), runtime_.rank());
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [&] { return stop_heartbeat_ || dead_peer_.has_value(); })) {
    lock.unlock();
    std::vector<std::pair<int, Future<Value>>> pings;
    for (int r : ranks) {
      try {
        pings.emplace_back(r, rpc::rpc_async(worker_name(r), "braid.ping", {}, bound));
      } catch (const std::exception& e) {
        fail(r, fmt::format("cannot reach it: {}", e.what()));
      }
    }
    for (auto& [r, f] : pings) {
      try {
        record_heartbeat(r, f.value(bound + rpc::Millis(1000)));
      } catch (const std::exception& e) {
        lock.lock();
        const bool stopping = stop_heartbeat_;
        lock.unlock();
        if (!stopping) fail(r, fmt::format("no answer to the heartbeat: {}", e.what()));
      }
    }
    lock.lock();
  }
  if (dead_peer_ && !stop_heartbeat_) {
    const auto [rank, reason] = *dead_peer_;
    lock.unlock();
    fail(rank, fmt::format("it died: its RPC connection to the driver broke ({})", reason));
  }
}

void Driver::record_heartbeat(int rank, const Value& answer) {
  const rpc::Dict& d = answer.as_dict();
  std::lock_guard<std::mutex> lock(mu_);
  heard_[rank] = Heard{d.find("state")->as_string(), d.find("step")->as_int(), Clock::now()};
}

nlohmann::json Driver::status_snapshot() {
  const RankStatus me = RankService::instance().status();
  nlohmann::json ranks = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (int r = 0; r < runtime_.world_size(); ++r) {
    nlohmann::json entry{{"rank", r}, {"role", std::string(role_name(role_of(job_, r)))}};
    if (r == runtime_.rank()) {
      entry.update({{"state", me.state + " (driver)"}, {"step", me.step}, {"last_heartbeat_s", 0.0}});
    } else if (auto it = heard_.find(r); it != heard_.end()) {
      entry.update({{"state", it->second.state}, {"step", it->second.step}, {"last_heartbeat_s", since(it->second.when)}});
    } else {
      entry.update({{"state", "not heard yet"}, {"step", 0}, {"last_heartbeat_s", -1.0}});
    }
    ranks.push_back(std::move(entry));
  }
  return nlohmann::json{{"job", job_.name},          {"file", job_.file},           {"state", me.state},
                        {"step", me.step},           {"total_steps", total_steps_.load()},
                        {"world_size", runtime_.world_size()}, {"ranks", std::move(ranks)}};
}

nlohmann::json Driver::trace_snapshot() {
  // Every rank dumps its flight recorders (collectives/queue/flight_recorder.h); the answer says where.
  // Runs on the status server's thread, which answers nothing else meanwhile (at most ~5 s).
  nlohmann::json ranks = nlohmann::json::array();
  std::vector<std::pair<int, Future<Value>>> asks;
  for (int r : other_ranks(runtime_.world_size(), runtime_.rank())) {
    try {
      asks.emplace_back(r, rpc::rpc_async(worker_name(r), "braid.trace_dump", {}, rpc::Millis(5000)));
    } catch (const std::exception& e) {
      ranks.push_back({{"rank", r}, {"error", e.what()}});
    }
  }
  const std::string mine = collectives::trace::dump_all("braid status --trace");
  ranks.push_back({{"rank", runtime_.rank()}, {"file", mine}});
  for (auto& [r, f] : asks) {
    try {
      ranks.push_back({{"rank", r}, {"file", f.value(rpc::Millis(6000)).as_string()}});
    } catch (const std::exception& e) {
      ranks.push_back({{"rank", r}, {"error", e.what()}});
    }
  }
  return nlohmann::json{{"job", job_.name}, {"trace", std::move(ranks)}};
}

}  // namespace braid::runtime
