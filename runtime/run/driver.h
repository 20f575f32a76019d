// The driver: the rank that runs the job (the master if the job has one, else the first trainer, next to
// its own trainer). It creates the model's remote parts on the workers (round robin, or the worker rank
// model.args.worker names) and one Trainer per trainer rank over RPC, restores the latest checkpoint with
// --resume, then runs the steps: train_step on every trainer at once, waits for all, reports (progress
// line, metrics, --dump-grads), evaluates at epoch ends (or every train.eval_every steps) when the data has
// a test split, checkpoints every checkpoint.interval steps, on a signal and at the end, and finally stops
// every rank. docs/RUNTIME.md describes the protocol.
//
// Failures: a heartbeat thread pings every other rank every failure.heartbeat_s (each ping bounded by
// failure.timeout_s); a ping or a step that fails makes the driver log "rank R (role) failed: why", send a
// best-effort "braid.abort" to every other rank and exit 1. A rank whose RPC connection breaks (a process
// that died) is failed at once, by the same thread, without waiting for the next ping; and an error that
// follows a death (a collective or a call that lost its peer) blames the dead rank, not the one that saw it.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dist_autograd/remote_module.h"
#include "rpc/rref.h"
#include "runtime/job/job_spec.h"
#include "runtime/run/grad_dump.h"
#include "runtime/run/job_runtime.h"
#include "runtime/run/progress.h"
#include "runtime/run/status_server.h"
#include "runtime/run/trainer.h"

namespace braid::runtime {

struct RunOptions {
  bool resume = false;
  // Above 0 (a restarted job: LaunchEnv::restart_count), the job resumes as with --resume, and from step
  // 0 when it has no checkpoint yet.
  int restart_count = 0;
  std::string dump_grads;  // empty: none
};

class Driver {
 public:
  Driver(const JobSpec& job, const JobRuntime& runtime, RunOptions options);
  ~Driver();  // stops and joins the heartbeat thread
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Runs the job and stops every rank; returns the exit code (0). A failure of any rank ends the process
  // with exit code 1 (see above) and does not return.
  int run();

 private:
  struct PartPlacement {
    RemotePartHandle handle;
    int rank;  // the worker that hosts it
  };
  struct StepTotals {
    double loss = 0;
    int64_t samples = 0;
  };

  void create_remote_parts();
  // The remote parts worker `rank` hosts, as braid.save_modules and braid.load_modules take them:
  // [(name, module rref), ...].
  rpc::ValueList parts_on(int rank) const;
  void create_trainers();
  int64_t resume_step();  // the number of steps already done (0 without a checkpoint); sets cursor_
  // The workers' loads of their remote parts from checkpoint `step_dir`, appended to loads and ranks:
  // each part from the file of the rank that saved it (meta "parts"), which may be another worker.
  void load_parts(const std::string& step_dir, const nlohmann::json& meta, std::vector<Future<rpc::Value>>& loads,
                  std::vector<int>& ranks) const;

  // Where the job stands in its data: the epoch, the parts of it run on other trainer counts before a
  // resume (DistributedSampler::set_epoch), and the batch within the current part. A checkpoint's
  // meta.json holds it as "data": {"epoch", "batch", "before": [[trainers, batches], ...]}.
  struct DataCursor {
    int64_t epoch = 0;
    std::vector<EpochSegment> before;
    int64_t batch = 0;
  };
  DataCursor read_cursor(const nlohmann::json& meta, int64_t step) const;
  nlohmann::json cursor_json() const;
  nlohmann::json parts_json() const;  // {part name: worker rank}, for the checkpoint's meta
  int64_t segment_batches();  // batches of the current part of the epoch, per trainer
  StepTotals run_step(int64_t step);  // at cursor_
  void evaluate(int64_t step, int64_t epoch);
  // Starts the checkpoint of `step` (with checkpoint.async the ranks copy their state and write it in the
  // background) and returns its directory; it is committed by finish_checkpoint().
  std::string save_checkpoint(int64_t step, int64_t epoch);
  // Commits the pending checkpoint once every rank has written its file: at once when they all have, else
  // only with `block` (waiting for them), else later.
  void finish_checkpoint(bool block);
  void destroy_trainers();
  void stop_everyone(const std::string& message);

  // Waits for `futures` (one per rank in `ranks`); a failure is the job's failure.
  std::vector<rpc::Value> wait_all(std::vector<Future<rpc::Value>>& futures, const std::vector<int>& ranks,
                                   const std::string& what);
  [[noreturn]] void fail(int rank, const std::string& why);
  // Calls `method` on every trainer (arguments per trainer index); futures in trainer order.
  std::vector<Future<rpc::Value>> call_trainers(const std::string& method,
                                                const std::function<rpc::Args(size_t)>& args);
  void heartbeat_loop();
  // A rank known dead (its RPC connection broke), else the first other rank that does not answer a short
  // ping; -1 when all do.
  int find_unreachable_rank();
  // Once another thread is failing the job, waits for it to end the process: nothing more is done (no
  // checkpoint is committed) by a job that has failed.
  void hold_if_failing();
  // `rank`, unless a rank is known dead: a failure seen here then is most likely the echo of that death.
  int blame(int rank) const;

  // What `braid status` shows (status_server.h).
  nlohmann::json status_snapshot();
  // What `braid status --trace` shows: each rank's flight-recorder dump file (or why it has none).
  nlohmann::json trace_snapshot();
  void record_heartbeat(int rank, const rpc::Value& answer);

  const JobSpec& job_;
  const JobRuntime& runtime_;
  const RunOptions options_;
  std::vector<PartPlacement> parts_;
  std::vector<std::shared_ptr<dist_autograd::RemoteModule>> remote_modules_;  // keep the parts alive
  std::vector<rpc::RRef> trainers_;
  int64_t num_batches_ = 1;
  int64_t dataset_size_ = 0;
  DataCursor cursor_;
  std::optional<int64_t> segment_batches_;  // cached for segment_key_
  std::pair<int64_t, std::vector<EpochSegment>> segment_key_;
  bool has_test_ = false;
  std::optional<double> last_accuracy_;
  struct PendingCheckpoint {
    int64_t step = 0;
    std::string dir;
    nlohmann::json meta;
    std::vector<int> writing;  // ranks whose file is not written yet
  };
  std::optional<PendingCheckpoint> pending_;  // saved, not yet committed
  int64_t last_checkpoint_step_ = -1;
  std::string last_checkpoint_dir_;
  std::unique_ptr<GradDumpWriter> dump_;  // --dump-grads
  ProgressPrinter progress_;
  MetricsWriter metrics_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_heartbeat_ = false;  // GUARDED_BY(mu_)
  std::optional<std::pair<int, std::string>> dead_peer_;  // GUARDED_BY(mu_): the first death RPC reported
  std::atomic<bool> failing_{false};
  std::atomic<int64_t> total_steps_{0};
  struct Heard {
    std::string state;
    int64_t step = 0;
    std::chrono::steady_clock::time_point when;
  };
  std::map<int, Heard> heard_;  // GUARDED_BY(mu_): the last heartbeat answer of each other rank
  std::unique_ptr<StatusServer> status_server_;
  std::thread heartbeat_;
};

}  // namespace braid::runtime
