// What every rank of a job serves besides its role's objects, and how a rank that does not drive waits:
// the process-wide RankService and the RPC functions the driver calls on every rank.
//
//   "braid.ping"          () -> {"rank", "role", "state", "step"}: the driver's heartbeat
//   "braid.stop"          (message) : the job is over; serve_until_stop() returns the message to log
//   "braid.abort"         (why)     : another rank failed; this process logs why and exits 1 at once
//   "braid.signal"        (name)    : (to the driver) a rank got SIGTERM/SIGUSR1/SIGINT: checkpoint and stop
//   "braid.save_modules"  (path, [(name, module RRef)]) : a worker saves its hosted modules' state
//   "braid.load_modules"  (path, [(name, module RRef)]) : and loads it back (--resume)
//                         (both only inside checkpoint.dir: checkpoint_file below)
//
// Ranks other than the driver wait in serve_until_stop(), which is also their watchdog: when the driver
// has not been heard from (any call from it counts) for failure.timeout_s, the rank exits 1 naming it. The
// same loop sweeps distributed-autograd contexts older than failure.context_ttl_s: contexts a trainer that
// died left on this rank, which nothing else would release.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/job/job_spec.h"

namespace braid::runtime {

struct RankStatus {
  int rank = -1;
  std::string role;
  std::string state;  // starting, serving, training, checkpointing, stopping, stopped
  int64_t step = 0;
};

class RankService {
 public:
  static RankService& instance();

  // Before the RPC agent starts (calls may arrive as soon as it does).
  void configure(const JobSpec& job, int rank);
  // The driver was heard from.
  void touch();
  // Blocks until "braid.stop" arrives and returns its message. Exits the process (1) when the driver is
  // silent for failure.timeout_s.
  std::string serve_until_stop();
  void request_stop(std::string message);

  // Logs `why`, flushes the logs and ends the process with exit code 1 without unwinding: this rank may be
  // blocked in a collective with a dead peer, or in an RPC to it, and nothing would wake those threads in
  // time; destructors of the groups and of the agent would wait on them too.
  [[noreturn]] void abort_process(const std::string& why);

  // What "braid.ping" reports.
  void set_status(std::string state, int64_t step);
  RankStatus status() const;
  // On the driver: a stop asked for by a signal (here or on another rank). The first request wins and stays
  // set (the driver stops at its first sight of it, so it is never read twice).
  void request_driver_stop(std::string signal_name);
  std::optional<std::string> take_driver_stop();

  // `path` resolved and confined to the job's checkpoint.dir (confined_path.h), for what an RPC asks to
  // write or read (braid.save_modules, braid.load_modules, a trainer's save and load): the caller chooses
  // the path, so it is followed only inside the job's own directory. InvalidArgument naming `what`.
  std::string checkpoint_file(const std::string& path, std::string_view what) const;

  // Releases contexts older than `ttl`; returns how many (also called by the serve loop).
  static size_t sweep_contexts(std::chrono::steady_clock::duration ttl);

 private:
  RankService() = default;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  const JobSpec* job_ = nullptr;  // GUARDED_BY(mu_)
  int rank_ = -1;                 // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_contact_ = std::chrono::steady_clock::now();  // GUARDED_BY(mu_)
  std::optional<std::string> stop_message_;  // GUARDED_BY(mu_)
  std::optional<std::string> driver_stop_;   // GUARDED_BY(mu_)
  std::string state_ = "starting";          // GUARDED_BY(mu_)
  int64_t step_ = 0;                        // GUARDED_BY(mu_)
};

// Registers the functions above in rpc::global_registry() (once per process).
void register_rank_functions();

}  // namespace braid::runtime
