#include "runtime/run/rank_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "base/check.h"
#include "base/logging.h"
#include "collectives/queue/flight_recorder.h"
#include "dist_autograd/context.h"
#include "dist_autograd/hosted_module.h"
#include "nn/serialize.h"
#include "nn/state_dict_file.h"
#include "rpc/api.h"
#include "runtime/run/checkpoint_writer.h"
#include "runtime/run/confined_path.h"
#include "runtime/run/pause_watch.h"
#include "runtime/run/resume_state.h"
#include "runtime/run/roles.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::runtime {

using rpc::Args;
using rpc::Dict;
using rpc::Value;

namespace {

std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

}  // namespace

RankService& RankService::instance() {
  static RankService service;
  return service;
}

void RankService::configure(const JobSpec& job, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  job_ = &job;
  rank_ = rank;
  last_contact_ = std::chrono::steady_clock::now();
  stop_message_.reset();
  driver_stop_.reset();
  dead_.clear();
  in_group_since_.reset();
  peers_may_leave_ = false;
}

void RankService::touch() {
  std::lock_guard<std::mutex> lock(mu_);
  last_contact_ = std::chrono::steady_clock::now();
}

void RankService::request_stop(std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_message_ = std::move(message);
    last_contact_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
}

std::string RankService::serve_until_stop() {
  std::unique_lock<std::mutex> lock(mu_);
  BRAID_CHECK_ARG(job_ != nullptr, "RankService: serve_until_stop before configure");
  const JobSpec& job = *job_;
  const auto timeout = seconds(job.failure.timeout_s);
  // Checked every tick, and a tick early, so that the rank is gone within failure.timeout_s of its last
  // contact with the driver.
  const auto tick = std::chrono::milliseconds(250);
  const auto limit = std::max(timeout - 2 * tick, tick);
  const auto ttl = seconds(job.failure.context_ttl_s);
  state_ = "serving";
  while (!stop_message_) {
    cv_.wait_for(lock, tick);
    if (stop_message_) break;
    const auto silent = std::chrono::steady_clock::now() - last_contact_;
    if (silent > limit) {
      const int driver = driver_rank(job);
      std::string why = fmt::format("the driver, {}, has not been heard from for {:g} s", describe_rank(job, driver),
                                    job.failure.timeout_s);
      // A rank that was itself stopped wakes to a silent driver: say so, the failure may be this rank's.
      if (const std::string paused = PauseWatch::describe_recent(PauseWatch::window_for(job.failure.timeout_s)); !paused.empty()) {
        why = fmt::format("{} ({}); {}", describe_rank(job, rank_), paused, why);
      }
      why += "; exiting";
      lock.unlock();
      abort_process(why);
    }
    lock.unlock();
    sweep_contexts(ttl);
    lock.lock();
  }
  state_ = "stopped";
  return *stop_message_;
}

size_t RankService::sweep_contexts(std::chrono::steady_clock::duration ttl) {
  size_t swept = 0;
  for (const auto& c : dist_autograd::list_contexts()) {
    if (c.age < ttl) continue;
    if (dist_autograd::release_abandoned_context(c.id)) {
      ++swept;
      logging::get("braid.run")->warn("released distributed autograd context {} of worker {}, left for {:.0f} s "
                                      "(its trainer is gone)", c.id, c.creator,
                                      std::chrono::duration<double>(c.age).count());
    }
  }
  return swept;
}

void RankService::abort_process(const std::string& why) {
  logging::get("braid.run")->error("{}", why);
  // What the collectives were doing when the job gave up (no-op when no group records).
  (void)collectives::trace::dump_all("abort");
  logging::get("braid.run")->flush();
  spdlog::shutdown();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

std::string RankService::checkpoint_file(const std::string& path, std::string_view what) const {
  std::string root;
  {
    std::lock_guard<std::mutex> lock(mu_);
    BRAID_CHECK_ARG(job_ != nullptr, "{}: '{}' refused: this rank has no job yet", what, path);
    root = job_->checkpoint.dir;
  }
  return confine_path(path, root, what);
}

void RankService::on_peer_failure(int peer, const std::string& reason) {
  std::string why;
  bool ending_death = false;
  {
    // Held while the listener runs, so that clearing it (the Driver's destructor) waits for a call in flight.
    std::lock_guard<std::mutex> listener_lock(listener_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      dead_.emplace(peer, reason);
      if (job_ == nullptr) return;
      const int driver = driver_rank(*job_);
      const bool ending = ending_ || stop_message_.has_value() || state_ == "stopping" || state_ == "stopped";
      if (!peer_listener_ && peer == driver && rank_ != driver && !ending) {
        why = fmt::format("{} died: its RPC connection to this rank broke ({}); exiting", describe_rank(*job_, driver),
                          reason);
      } else if (!peer_listener_ && ending && !peers_may_leave_) {
        // As the job ends, connections close once every rank is at RPC shutdown's last barrier, and this
        // rank is not yet: the peer died (a launcher may end this rank within moments: say so now).
        why = fmt::format("{} died as the job was ending: its RPC connection to this rank broke ({})",
                          describe_rank(*job_, peer), reason);
        // The first connection to break may be that of a rank that gave up on the one that failed
        // (stopped, or dead without a connection here): every failure seen is named.
        for (const auto& [r, r_why] : dead_) {
          if (r != peer) why += fmt::format("; {} died ({})", describe_rank(*job_, r), r_why);
        }
        ending_death = true;
      }
    }
    if (peer_listener_) {
      peer_listener_(peer, reason);
      return;
    }
  }
  if (ending_death) {
    if (const std::string seen = local_failed_peer(); !seen.empty()) why += "; on this host: " + seen;
    why += "; exiting";
  }
  if (!why.empty()) abort_process(why);
}

namespace {

std::string proc_key(int rank) { return fmt::format("braid/process/{}", rank); }

}  // namespace

void RankService::publish_process(store::Store& store, int rank, const std::string& device) {
  store.set(proc_key(rank), store::to_bytes(fmt::format("{} {} {}", LocalPeers::this_host(), ::getpid(), device)));
}

void RankService::read_processes(store::Store& store, int world_size) {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(proc_key(r));
  LocalPeers::Table found;
  std::map<int, std::string> devices;
  const auto values = store.multi_get(keys, std::chrono::milliseconds(10'000));
  for (int r = 0; r < world_size; ++r) {
    std::istringstream entry(store::to_string(values[static_cast<size_t>(r)]));
    std::string host;
    long pid = 0;
    std::string device;
    if (entry >> host >> pid) found[r] = {host, pid};
    if (entry >> device) devices[r] = device;
  }
  int self = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    self = rank_;
  }
  peers_.set(std::move(found), self);  // outside mu_: the two locks are never nested
  std::lock_guard<std::mutex> lock(mu_);
  devices_ = std::move(devices);
  in_group_since_ = std::chrono::steady_clock::now();
}

std::map<int, std::string> RankService::device_placement() const {
  const LocalPeers::Table table = peers_.table();
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, std::string> out;
  for (const auto& [r, device] : devices_) {
    const auto it = table.find(r);
    out[r] = fmt::format("{} {}", it == table.end() ? std::string("?") : it->second.first, device);
  }
  return out;
}

std::string RankService::device_of(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = devices_.find(rank);
  return it == devices_.end() ? "cpu" : it->second;
}

std::optional<std::chrono::steady_clock::time_point> RankService::in_default_group_since() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_group_since_;
}

std::string RankService::local_failed_peer(bool dead_only) {
  return local_peers(dead_only ? LocalPeers::Filter::kDead : LocalPeers::Filter::kFailed);
}

std::string RankService::local_stopped_peers() { return local_peers(LocalPeers::Filter::kStopped); }

const JobSpec* RankService::job() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_;
}

std::string RankService::local_peers(LocalPeers::Filter filter) {
  const JobSpec* job = this->job();
  if (job == nullptr) return "";
  // A stop matters while the peers' watchdogs and the launcher may still act on it (pause_watch.h).
  return peers_.describe(filter, [job](int r) { return describe_rank(*job, r); },
                         PauseWatch::window_for(job->failure.timeout_s));
}

std::string RankService::local_peer_ended(int rank) {
  const JobSpec* job = this->job();
  return job == nullptr ? "" : peers_.ended(rank, [job](int r) { return describe_rank(*job, r); });
}

std::string RankService::placement() const {
  std::map<std::string, std::vector<int>> by_host;  // sorted by name: the same line on every rank
  for (const auto& [r, where] : peers_.table()) by_host[where.first].push_back(r);
  if (by_host.size() == 1) return fmt::format("1 host ({})", by_host.begin()->first);
  std::vector<std::string> hosts;
  for (const auto& [host, ranks] : by_host) {
    std::vector<std::string> runs;  // 0-3,6
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      runs.push_back(j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
      i = j + 1;
    }
    hosts.push_back(fmt::format("{}: {} {}", host, ranks.size() == 1 ? "rank" : "ranks", fmt::join(runs, ",")));
  }
  return fmt::format("{} hosts ({})", by_host.size(), fmt::join(hosts, "; "));
}

bool RankService::job_ending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ending_ || stop_message_.has_value() || state_ == "stopping" || state_ == "stopped";
}

void RankService::set_peers_may_leave() {
  std::lock_guard<std::mutex> lock(mu_);
  peers_may_leave_ = true;
}

bool RankService::peers_may_have_left() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peers_may_leave_;
}

std::map<int, std::string> RankService::dead_peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dead_;
}

void RankService::set_peer_failure_listener(std::function<void(int, const std::string&)> listener) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  peer_listener_ = std::move(listener);
}

std::string name_workers(const JobSpec& job, const std::string& text) {
  static const std::regex worker_re("worker([0-9]+)");
  std::string out;
  auto last = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), worker_re), end; it != end; ++it) {
    const auto& m = *it;
    out.append(last, m[0].second);
    int rank = -1;
    try {
      rank = std::stoi(m[1].str());
    } catch (const std::exception&) {
    }
    if (rank >= 0 && rank < job.roles.world_size()) out += " (" + describe_rank(job, rank) + ")";
    last = m[0].second;
  }
  out.append(last, text.cend());
  return out;
}

void RankService::set_status(std::string state, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  state_ = std::move(state);
  step_ = step;
  // Sticky: the driver's final checkpoint reports "checkpointing" after "stopping", and the job is ending
  // all the same.
  if (state_ == "stopping" || state_ == "stopped") ending_ = true;
}

RankStatus RankService::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  RankStatus st;
  st.rank = rank_;
  st.role = job_ != nullptr ? std::string(role_name(role_of(*job_, rank_))) : "";
  st.state = state_;
  st.step = step_;
  return st;
}

void RankService::request_driver_stop(std::string signal_name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!driver_stop_) driver_stop_ = std::move(signal_name);
}

std::optional<std::string> RankService::take_driver_stop() {
  std::lock_guard<std::mutex> lock(mu_);
  return driver_stop_;
}

namespace {

Value ping() {
  RankService& s = RankService::instance();
  s.touch();
  const RankStatus st = s.status();
  Dict d;
  d.set("rank", Value(st.rank));
  d.set("role", Value(st.role));
  d.set("state", Value(st.state));
  d.set("step", Value(st.step));
  return Value(std::move(d));
}

}  // namespace

void register_rank_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = rpc::global_registry();
    r.add_function("braid.ping", [](const Args&) { return ping(); });
    r.add_function("braid.stop", [](const Args& a) {
      RankService::instance().request_stop(a.at(0).as_string());
      return Value();
    });
    r.add_function("braid.abort", [](const Args& a) -> Value {
      RankService::instance().abort_process(a.at(0).as_string());
    });
    r.add_function("braid.trace_dump", [](const Args&) {
      RankService::instance().touch();
      return Value(collectives::trace::dump_all("braid status --trace"));
    });
    r.add_function("braid.signal", [](const Args& a) {
      RankService::instance().request_driver_stop(a.at(0).as_string());
      return Value();
    });
    r.add_function("braid.save_modules", [](const Args& a) {
      RankService::instance().touch();
      nn::StateDict state;
      for (const Value& v : a.at(1).items()) {
        const std::string& name = v.items().at(0).as_string();
        for (auto& [key, t] : dist_autograd::local_module(v.items().at(1).as_rref())->state_dict()) {
          state.emplace_back(name + "." + key, t);
        }
      }
      // Dropout in a remote part draws from this process's default generator.
      state.emplace_back(kWorkerGeneratorKey, bytes_tensor(default_generator().save_state()));
      const std::string path = RankService::instance().checkpoint_file(a.at(0).as_string(), "braid.save_modules");
      // (path, parts[, async]): async returns once the state is copied (default: once written).
      write_checkpoint_file(path, state, a.size() > 2 && a.at(2).as_bool());
      return Value();
    });
    // Whether this rank's asynchronous write of a checkpoint file is done (checkpoint_writer.h): true once,
    // false while it runs, the write's error when it failed. Never blocks: the driver asks after each step.
    r.add_function("braid.checkpoint_written", [](const Args& a) {
      RankService::instance().touch();
      return Value(process_checkpoint_writer().written(
          RankService::instance().checkpoint_file(a.at(0).as_string(), "braid.checkpoint_written")));
    });
    r.add_function("braid.load_modules", [](const Args& a) {
      RankService::instance().touch();
      const std::string path = RankService::instance().checkpoint_file(a.at(0).as_string(), "braid.load_modules");
      // (path, parts[, generator]): only the named parts' entries are read (the file may hold others,
      // when the parts moved to other workers since), and the generator only when asked.
      const nn::StateDictFile file(path);
      const bool generator = a.size() < 3 || a.at(2).as_bool();
      for (const Value& v : a.at(1).items()) {
        const std::string prefix = v.items().at(0).as_string() + ".";
        nn::StateDict mine;
        for (const auto& e : file.entries()) {
          if (e.name.rfind(prefix, 0) == 0) mine.emplace_back(e.name.substr(prefix.size()), file.read(e.name));
        }
        BRAID_CHECK_ARG(!mine.empty(), "{}: no entries of remote part '{}' (a checkpoint of another model?)", path,
                        v.items().at(0).as_string());
        try {
          dist_autograd::local_module(v.items().at(1).as_rref())->load_state_dict(mine, /*strict=*/true);
        } catch (const std::exception& e) {
          BRAID_THROW(InvalidArgument, "{}: remote part '{}': {} (a checkpoint of another model?)", path,
                      v.items().at(0).as_string(), e.what());
        }
      }
      if (generator && file.find(kWorkerGeneratorKey) != nullptr) {
        const Tensor t = file.read(kWorkerGeneratorKey);
        try {
          default_generator().restore_state(tensor_bytes(t, kWorkerGeneratorKey));
        } catch (const std::exception& e) {
          BRAID_THROW(InvalidArgument, "{}: entry '{}': {}", path, kWorkerGeneratorKey, e.what());
        }
      }
      return Value();
    });
  });
}

}  // namespace braid::runtime
