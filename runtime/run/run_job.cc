#include "runtime/run/run_job.h"

#include "base/check.h"
#include "base/logging.h"
#include "rpc/api.h"
#include "runtime/models/model_registry.h"
#include "runtime/plugin/plugin_loader.h"
#include "runtime/run/instance_registry.h"
#include "runtime/run/job_runtime.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/signals.h"
#include "runtime/run/trainer.h"

namespace braid::runtime {

int run_job(const JobSpec& job, const LaunchEnv& env, const RunOptions& options) {
  block_job_signals();
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

  JobRuntime runtime(job, env);
  const int driver = driver_rank(job);
  // A signal anywhere becomes a stop request on the driver, which checkpoints and stops every rank.
  SignalWatcher signals([&](int signo) {
    const std::string name = signal_name(signo);
    logging::get("braid.run")->warn("got {}: asking the driver to checkpoint and stop", name);
    if (runtime.is_driver()) {
      RankService::instance().request_driver_stop(name);
      return;
    }
    rpc::rpc_async(worker_name(driver), "braid.signal", {rpc::Value(name)}, rpc::Millis(5000))
        .wait(std::chrono::milliseconds(6000));
  });

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
  runtime.shutdown_rpc(/*graceful=*/true);
  return 0;
}

}  // namespace braid::runtime
