#include "runtime/run/run_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <vector>

#include "base/check.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "rpc/api.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"
#include "runtime/run/instance_registry.h"
#include "runtime/run/job_runtime.h"
#include "runtime/run/pause_watch.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/signals.h"
#include "runtime/run/trainer.h"

namespace braid::runtime {

namespace {

// "; on this host: rank 2 (worker) is stopped (pid 123)" when a peer here is gone, has exited or is stopped.
std::string on_this_host() {
  const std::string seen = RankService::instance().local_failed_peer();
  return seen.empty() ? "" : "; on this host: " + seen;
}

// Why a launcher is ending the job, when it is because a rank failed; "" when nothing says so (a stop an
// operator asked for). Every source is named, since none alone tells the first failure: `braid launch`
// writes "rank R killed by SIGKILL" to BRAID_LAUNCH_NOTICE before its SIGTERM (the first rank to end, which
// may be one that gave up on a hung peer); RPC knows the ranks whose connections broke; and the processes
// on this host show which ranks are gone or stopped (mpirun and srun say nothing).
std::string failure_behind_signal(const JobSpec& job, int self) {
  // A job that is ending normally has ranks leaving: a signal then is no sign of a failure, unless a peer
  // here is stopped (none stops in a normal ending; the launcher ends the job around the hung one).
  if (RankService::instance().job_ending()) {
    const std::string stopped = RankService::instance().local_stopped_peers();
    return stopped.empty() ? "" : "the job was ending, but " + stopped;
  }
  std::vector<std::string> parts;
  if (const char* path = std::getenv("BRAID_LAUNCH_NOTICE"); path != nullptr && *path != 0) {
    std::ifstream in(path);
    std::string line;
    std::smatch m;
    static const std::regex notice_re("rank ([0-9]+) (.*)");
    if (std::getline(in, line) && std::regex_match(line, m, notice_re)) {
      // The digits may not fit an int (a corrupt notice): such a rank names nobody.
      int rank = -1;
      const std::string digits = m[1].str();
      std::from_chars(digits.data(), digits.data() + digits.size(), rank);
      if (rank >= 0 && rank < job.roles.world_size() && rank != self) {
        parts.push_back(fmt::format("braid launch reports that {} failed: {}", describe_rank(job, rank), m[2].str()));
      }
    }
  }
  for (const auto& [rank, why] : RankService::instance().dead_peers()) {
    if (rank != self) parts.push_back(fmt::format("{} died ({})", describe_rank(job, rank), why));
  }
  // Before RPC knows anyone (the rendezvous), or for a peer it never talked to: a process on this host.
  if (std::string local = RankService::instance().local_failed_peer(); !local.empty()) parts.push_back(local);
  // Continued after a stop (mpirun sends SIGCONT with its SIGTERM), a rank finds peers that gave up on it:
  // the hang was its own. Only beside a failure: a starved rank that gets an operator's SIGTERM still stops
  // cleanly.
  if (std::string paused = PauseWatch::describe_recent(PauseWatch::window_for(job.failure.timeout_s));
      !paused.empty() && !parts.empty()) {
    parts.insert(parts.begin(), fmt::format("{} hung: {}", describe_rank(job, self), paused));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Once every rank is in the default group, the rest of joining (the trainers' group, RPC) takes moments; a
// rank still joining failure.timeout_s later waits for a peer that hangs (a stopped process), which
// nothing else would find before the rendezvous timeout (30 s or more). It names what it can see.
// A peer on this host whose process is gone or has exited cannot join any more: that is acted on at the
// next tick, before a launcher (mpirun, srun) ends the job over the dead rank and, as mpirun does, drops
// what the ranks it ends write as they go.
class JoinWatchdog {
 public:
  explicit JoinWatchdog(const JobSpec& job) : job_(job), thread_([this] { run(); }) {}
  ~JoinWatchdog() { done(); }
  JoinWatchdog(const JoinWatchdog&) = delete;
  JoinWatchdog& operator=(const JoinWatchdog&) = delete;

  void done() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    const auto limit = std::chrono::milliseconds(static_cast<int64_t>(job_.failure.timeout_s * 1000));
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return done_; })) {
      const auto since = RankService::instance().in_default_group_since();
      if (!since) continue;
      if (!RankService::instance().local_failed_peer(/*dead_only=*/true).empty()) {
        // Every failed peer, the stopped ones too: a peer that exited may have given up on a stopped one.
        lock.unlock();
        RankService::instance().abort_process(
            fmt::format("joining the job: {}; exiting", RankService::instance().local_failed_peer()));
      }
      if (std::chrono::steady_clock::now() - *since < limit) continue;
      lock.unlock();
      const std::string seen = RankService::instance().local_failed_peer();
      RankService::instance().abort_process(fmt::format(
          "joining the job: the trainers' group and RPC are not up {:g} s (failure.timeout_s) after every rank was "
          "in the default group: {}; exiting", job_.failure.timeout_s, seen.empty() ? "a rank hangs" : seen));
    }
  }

  const JobSpec& job_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace

int run_job(const JobSpec& job, const LaunchEnv& env, const RunOptions& options) {
  block_job_signals();
  fault::arm(env.rank);  // BRAID_FAULT (base/fault_injection.h): off unless set
  // Plugins first, on every rank and before anything starts: a library that cannot load stops this rank
  // with its reason before it joins the job, and the launcher ends the others.
  load_job_plugins(job);
  // The model is checked before anything starts; looking it up also registers the built-in module classes,
  // which must happen before the RPC agent starts: the driver creates the remote parts on the workers as
  // soon as everyone has joined.
  validate_job_model(job);
  BRAID_CHECK_ARG(!options.resume || !job.checkpoint.dir.empty(),
                  "--resume: {} sets no checkpoint.dir (give one with --set checkpoint.dir=DIR)", job.file);
  RankService::instance().configure(job, env.rank);
  register_rank_functions();
  register_instance_functions();
  register_trainer_class([&job]() -> const JobSpec& { return job; }, [] { return process_trainers_group(); });

  const int driver = driver_rank(job);
  const bool is_driver = env.rank == driver;
  std::atomic<bool> joined{false};
  // A signal anywhere becomes a stop request on the driver, which checkpoints and stops every rank;
  // unless the signal comes from a launcher ending a job that lost a rank (below), or comes before this
  // rank has joined (nothing to checkpoint: it leaves at once rather than wait out the rendezvous).
  SignalWatcher signals([&](int signo) {
    const std::string name = signal_name(signo);
    if (const std::string why = failure_behind_signal(job, env.rank); !why.empty()) {
      RankService::instance().abort_process(fmt::format("got {}: {}; exiting", name, why));
    }
    if (!joined.load()) {
      RankService::instance().abort_process(fmt::format("got {} while joining the job (a launcher ends a job when "
                                                        "a rank fails; it names the rank); exiting", name));
    }
    logging::get("braid.run")->warn("got {}: asking the driver to checkpoint and stop", name);
    if (is_driver) {
      RankService::instance().request_driver_stop(name);
      return;
    }
    rpc::rpc_async(worker_name(driver), "braid.signal", {rpc::Value(name)}, rpc::Millis(5000))
        .wait(std::chrono::milliseconds(6000));
  });

  // A rank continued after a stop must know it was the one that hung (pause_watch.h).
  PauseWatch pause_watch;
  JoinWatchdog join_watchdog(job);
  // A peer that fails while this rank joins often shows first as a broken store connection (rank 0's
  // watchdog ended its process, and the store with it): name the peers this host sees failed beside it.
  std::optional<JobRuntime> joining;
  try {
    joining.emplace(job, env);
  } catch (const std::exception& e) {
    if (const std::string seen = RankService::instance().local_failed_peer(); !seen.empty()) {
      RankService::instance().abort_process(fmt::format("joining the job failed: {}; {}; exiting", e.what(), seen));
    }
    throw;
  }
  JobRuntime& runtime = *joining;
  joined.store(true);
  join_watchdog.done();

  if (runtime.is_driver()) {
    Driver d(job, runtime, options);
    d.run();
  } else {
    const std::string message = RankService::instance().serve_until_stop();
    if (message.rfind("stopping", 0) == 0) {
      logging::get("braid.run")->warn("{}", message);
    } else {
      logging::get("braid.run")->debug("{}", message);
    }
  }
  clear_instances();  // their RRefs go before the agent does
  fault::point("shutdown");  // stopped, about to leave the job (BRAID_FAULT)
  try {
    runtime.shutdown_rpc(/*graceful=*/true);
  } catch (const TimeoutError& e) {
    // A rank hung while the job ended (RPC names workers, the job names ranks). The process ends here,
    // without unwinding into the groups of a job that lost a rank.
    RankService::instance().abort_process(
        fmt::format("the job's RPC shutdown failed: {}{}", name_workers(job, e.what()), on_this_host()));
  } catch (const std::exception& e) {
    // A rank died while the job ended: RPC names those it knows dead; when the store's host died, the
    // store's error does not, so the ranks whose connections broke are named too. A peer that hangs (a
    // stopped process) breaks no connection: the processes on this host name it.
    std::string dead;
    for (const auto& [r, why] : RankService::instance().dead_peers()) {
      dead += fmt::format("{}{} is gone ({})", dead.empty() ? "" : "; ", describe_rank(job, r), why);
    }
    RankService::instance().abort_process(fmt::format("the job's RPC shutdown failed{}: {}{}",
                                                       dead.empty() ? "" : ": " + dead, name_workers(job, e.what()),
                                                       on_this_host()));
  }
  return 0;
}

}  // namespace braid::runtime
