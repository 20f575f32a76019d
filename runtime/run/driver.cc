#include "runtime/run/driver.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "base/check.h"
#include "base/env.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "rpc/api.h"
#include "runtime/models/model_registry.h"
#include "runtime/run/driver_detail.h"
#include "runtime/run/grad_dump.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/roles.h"

namespace braid::runtime {

using rpc::Args;
using rpc::Value;

using namespace driver_detail;

Driver::Driver(const JobSpec& job, const JobRuntime& runtime, RunOptions options)
    : job_(job),
      runtime_(runtime),
      options_(std::move(options)),
      progress_(stdout, !std::getenv("OMPI_COMM_WORLD_SIZE")),
      metrics_(job.log.metrics) {
  if (!options_.dump_grads.empty()) dump_ = std::make_unique<GradDumpWriter>(options_.dump_grads);
  // Runs on an RPC transport thread: hand the death to the heartbeat thread, which fails the job.
  RankService::instance().set_peer_failure_listener([this](int peer, const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Once the job is stopping, ranks close their connections as they finish.
      if (stop_heartbeat_ || dead_peer_) return;
      dead_peer_.emplace(peer, reason);
    }
    cv_.notify_all();
  });
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

Driver::~Driver() {
  RankService::instance().set_peer_failure_listener(nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_heartbeat_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::vector<Value> Driver::wait_all(std::vector<Future<Value>>& futures, const std::vector<int>& ranks,
                                    const std::string& what) {
  // Watch them all at once: the first failure is the job's, even while another rank is still blocked (in a
  // collective with the failed one, say).
  const auto deadline = Clock::now() + ms(job_.rpc.timeout_s) + rpc::Millis(5000);
  for (;;) {
    bool all_done = true;
    for (size_t i = 0; i < futures.size(); ++i) {
      if (!futures[i].completed()) {
        all_done = false;
        continue;
      }
      if (futures[i].has_error()) {
        try {
          std::rethrow_exception(futures[i].error());
        } catch (const std::exception& e) {
          // A trainer's error is often the echo of another rank's death (a collective or a remote forward
          // that lost its peer): blame a rank that no longer answers when there is one.
          const int dead = find_unreachable_rank();
          if (dead >= 0 && dead != ranks[i]) {
            fail(dead, fmt::format("it no longer answers ({} failed on {}: {})", what, describe_rank(job_, ranks[i]),
                                   e.what()));
          }
          fail(ranks[i], fmt::format("{}: {}", what, e.what()));
        }
      }
    }
    if (all_done) break;
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < futures.size(); ++i) {
        if (!futures[i].completed()) fail(ranks[i], fmt::format("{}: no answer within {} s", what, job_.rpc.timeout_s + 5));
      }
    }
    for (auto& f : futures) {
      if (f.completed()) continue;
      try {
        f.wait(std::chrono::milliseconds(20));
      } catch (const TimeoutError&) {
      }
      break;
    }
  }
  std::vector<Value> out;
  for (auto& f : futures) out.push_back(f.value(std::chrono::milliseconds(0)));
  return out;
}

std::vector<Future<Value>> Driver::call_trainers(const std::string& method, const std::function<Args(size_t)>& args) {
  // A method call on an object this process owns runs in the calling thread: the driver's own trainer
  // (when it is one) goes last, once the others are on their way, or a collective inside it would wait
  // for trainers that were never asked.
  const int self = trainer_index(job_, runtime_.rank());
  std::vector<Future<Value>> futures(trainers_.size());
  for (size_t t = 0; t < trainers_.size(); ++t) {
    if (static_cast<int>(t) != self) futures[t] = trainers_[t].rpc_async().call(method, args(t));
  }
  if (self >= 0) futures[static_cast<size_t>(self)] = trainers_[static_cast<size_t>(self)].rpc_async().call(method, args(static_cast<size_t>(self)));
  return futures;
}

void Driver::create_remote_parts() {
  const ModelDefinition& def = get_model(job_.model.kind);
  if (!def.remote_parts) return;
  const nlohmann::json args = job_.model.args.is_object() ? job_.model.args : nlohmann::json::object();
  const std::vector<RemotePart> parts = def.remote_parts(args);
  BRAID_CHECK_ARG(parts.empty() || !job_.roles.workers.empty(),
                  "{}: model '{}' has parts that live on workers, but roles names no worker", job_.file, job_.model.kind);
  for (size_t i = 0; i < parts.size(); ++i) {
    int rank = job_.roles.workers[i % job_.roles.workers.size()];
    if (args.contains("worker")) {
      const nlohmann::json& w = args["worker"];
      const std::string name = w.is_string() ? w.get<std::string>() : "";
      int64_t r = -1;
      if (w.is_string() && name.rfind("worker", 0) == 0) {
        r = env::parse_int(name.substr(6), fmt::format("model.args.worker '{}'", name));
      } else if (!w.is_string()) {
        r = w.get<int64_t>();
      }
      rank = r >= 0 && r <= std::numeric_limits<int>::max() ? static_cast<int>(r) : -1;
    }
    BRAID_CHECK_ARG(role_of(job_, rank) == Role::Worker, "model.args.worker: rank {} is not a worker", rank);
    // On the worker's own device (devices.workers), as it published it at start-up.
    const std::string device = worker_name(rank) + "/" + RankService::instance().device_of(rank);
    auto module = std::make_shared<dist_autograd::RemoteModule>(device, parts[i].module_class, parts[i].args);
    parts_.push_back({RemotePartHandle{parts[i].name, device, parts[i].module_class, module->module_rref()}, rank});
    // Named on its worker, so that any rank can look it up (instance_registry.h).
    rpc::rpc_sync(worker_name(rank), "braid.register_instance", {Value(parts[i].name), Value(module->module_rref())});
    remote_modules_.push_back(std::move(module));
    log()->debug("remote part '{}' ({}) on {}", parts[i].name, parts[i].module_class, describe_rank(job_, rank));
  }
}

void Driver::create_trainers() {
  std::vector<RemotePartHandle> handles;
  for (const auto& p : parts_) handles.push_back(p.handle);
  const Value parts = encode_parts(handles);
  const std::string job_text = to_json(job_).dump();
  // Every trainer's constructor is collective (DDP and FSDP broadcast over the trainers' group): make them
  // all, then wait.
  // rpc::remote to this very process constructs in the calling thread, so the driver's own trainer (when
  // it is one) comes last, once the others are on their way.
  trainers_.resize(job_.roles.trainers.size());
  const int self = trainer_index(job_, runtime_.rank());
  for (size_t t = 0; t < job_.roles.trainers.size(); ++t) {
    if (static_cast<int>(t) == self) continue;
    trainers_[t] = rpc::remote(worker_name(job_.roles.trainers[t]), kTrainerClass,
                               {Value(static_cast<int64_t>(t)), Value(job_text), parts});
  }
  if (self >= 0) {
    trainers_[static_cast<size_t>(self)] = rpc::remote(worker_name(runtime_.rank()), kTrainerClass,
                                                       {Value(static_cast<int64_t>(self)), Value(job_text), parts});
  }
  fault::point("rpc");  // the master's "rpc": its remote() calls to the trainers are in flight
  std::vector<Future<Value>> infos;
  infos = call_trainers("info", [](size_t) { return Args{}; });
  const auto answers = wait_all(infos, job_.roles.trainers, "creating its trainer");
  const rpc::Dict& info = answers.at(0).as_dict();
  num_batches_ = std::max<int64_t>(info.find("num_batches")->as_int(), 1);
  dataset_size_ = info.find("dataset_size")->as_int();
  has_test_ = info.find("has_test")->as_bool();
}

Driver::StepTotals Driver::run_step(int64_t step) {
  const bool want_grads = !options_.dump_grads.empty();
  fault::point("forward");  // the master's "forward": it is about to start a step on every trainer
  rpc::ValueList before;
  for (const EpochSegment& seg : cursor_.before) {
    before.push_back(rpc::list({Value(static_cast<int64_t>(seg.trainers)), Value(seg.batches)}));
  }
  const Value segments = rpc::list(std::move(before));
  auto futures = call_trainers("train_step", [&](size_t) {
    return Args{Value(cursor_.epoch), Value(cursor_.batch), Value(want_grads), Value(step), segments};
  });
  const auto results = wait_all(futures, job_.roles.trainers, fmt::format("step {}", step));
  StepTotals totals;
  double weighted = 0;
  for (size_t t = 0; t < results.size(); ++t) {
    const rpc::Dict& r = results[t].as_dict();
    const int64_t n = r.find("samples")->as_int();
    weighted += r.find("loss")->as_double() * static_cast<double>(n);
    totals.samples += n;
    if (want_grads) {
      const auto& micro = r.find("microbatches")->items();
      for (size_t m = 0; m < micro.size(); ++m) {
        const rpc::Dict& mb = micro[m].as_dict();
        dump_->write(job_.roles.trainers[t], step, static_cast<int64_t>(m), mb.find("loss")->as_double(),
                    mb.find("grads")->as_dict());
      }
    }
  }
  totals.loss = totals.samples > 0 ? weighted / static_cast<double>(totals.samples) : 0;
  return totals;
}

void Driver::evaluate(int64_t step, int64_t epoch) {
  auto futures = call_trainers("evaluate", [](size_t) { return Args{}; });
  const auto results = wait_all(futures, job_.roles.trainers, "evaluating");
  double loss = 0, correct = 0;
  int64_t samples = 0;
  const bool classified = results.at(0).as_dict().find("classified")->as_bool();
  for (const auto& v : results) {
    const rpc::Dict& r = v.as_dict();
    loss += r.find("loss_sum")->as_double();
    correct += r.find("correct")->as_double();
    samples += r.find("samples")->as_int();
  }
  if (samples == 0) return;
  const double mean_loss = loss / static_cast<double>(samples);
  const double acc = correct / static_cast<double>(samples);
  const std::string accuracy = classified ? fmt::format(" accuracy {:.2f}%", acc * 100) : "";
  progress_.line(fmt::format("eval after step {} (epoch {}): loss {:.4f}{} ({} test samples)", step, epoch, mean_loss,
                             accuracy, samples));
  nlohmann::json record{{"step", step}, {"epoch", epoch}, {"eval_loss", mean_loss}, {"eval_samples", samples}};
  if (classified) {
    record["eval_accuracy"] = acc;
    last_accuracy_ = acc;
  }
  metrics_.write(record);
}

void Driver::destroy_trainers() {
  auto futures = call_trainers("destroy", [](size_t) { return Args{}; });
  wait_all(futures, job_.roles.trainers, "destroying its trainer");
  trainers_.clear();
  remote_modules_.clear();
  parts_.clear();
}

void Driver::stop_everyone(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_heartbeat_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  status_server_.reset();
  std::vector<Future<Value>> stops;
  std::vector<int> ranks = other_ranks(runtime_.world_size(), runtime_.rank());
  for (int r : ranks) stops.push_back(rpc::rpc_async(worker_name(r), "braid.stop", {Value(message)}));
  wait_all(stops, ranks, "stopping");
}

int Driver::run() {
  const auto start = Clock::now();
  int64_t done = 0;
  try {
    RankService::instance().set_status("starting", 0);
    try {
      status_server_ = std::make_unique<StatusServer>(
          [this](const std::string& request) { return request == "trace" ? trace_snapshot() : status_snapshot(); },
          job_.status_file);
    } catch (const std::exception& e) {
      // `braid status` is a convenience: a job runs without it.
      log()->warn("no status endpoint (braid status will not find this job): {}", e.what());
    }
    create_remote_parts();
    create_trainers();
    done = resume_step();
  } catch (const std::exception& e) {
    fail(blame(runtime_.rank()), e.what());
  }
  // Steps: train.steps, or what is left of the epochs from where the job stands (another trainer count
  // after a resume gives the rest of the current epoch another length).
  int64_t total = job_.train.steps;
  if (total <= 0) {
    total = done;
    if (cursor_.epoch < job_.train.epochs) {
      total += segment_batches() - cursor_.batch + (job_.train.epochs - cursor_.epoch - 1) * num_batches_;
    }
  }
  total_steps_ = total;
  const int64_t total_epochs = job_.train.steps > 0 ? (total + num_batches_ - 1) / num_batches_ : job_.train.epochs;
  log()->info("training {} steps ({} per epoch, {} trainers) from step {}", total, num_batches_, trainers_.size(), done);
  int64_t samples_total = 0;
  double last_loss = 0;
  const auto loop_start = Clock::now();
  std::optional<std::string> stop_signal;
  try {
    while (done < total) {
      if (cursor_.batch >= segment_batches()) {  // the epoch is done (or had nothing left after a resume)
        cursor_ = DataCursor{cursor_.epoch + 1, {}, 0};
        continue;
      }
      const int64_t epoch = cursor_.epoch;
      RankService::instance().set_status("training", done);
      const StepTotals st = run_step(done + 1);
      ++done;
      ++cursor_.batch;
      samples_total += st.samples;
      last_loss = st.loss;
      StepReport rep{done, total, epoch + 1, total_epochs, st.loss, st.samples, 0, since(loop_start)};
      rep.samples_per_s = rep.elapsed_s > 0 ? static_cast<double>(samples_total) / rep.elapsed_s : 0;
      metrics_.write(step_record(rep));
      if (done % std::max(job_.log.interval, 1) == 0 || done == total) progress_.step(rep);
      const bool epoch_end = cursor_.batch >= segment_batches();
      if (epoch_end) cursor_ = DataCursor{epoch + 1, {}, 0};
      if (has_test_ && (epoch_end || (job_.train.eval_every > 0 && done % job_.train.eval_every == 0))) {
        evaluate(done, epoch + 1);
      }
      if (job_.checkpoint.interval > 0 && done % job_.checkpoint.interval == 0 && done < total) {
        save_checkpoint(done, epoch + 1);
      }
      finish_checkpoint(/*block=*/false);  // commits a checkpoint whose writes have all finished
      hold_if_failing();
      stop_signal = RankService::instance().take_driver_stop();
      if (stop_signal) break;
    }
    RankService::instance().set_status("stopping", done);
    const std::string ckpt = save_checkpoint(done, cursor_.batch > 0 ? cursor_.epoch + 1 : cursor_.epoch);
    finish_checkpoint(/*block=*/true);
    destroy_trainers();
    std::string message = "the job is done";
    if (stop_signal) {
      message = fmt::format("stopping on {} after step {}; checkpoint {}", *stop_signal, done, ckpt.empty() ? "none (no checkpoint.dir)" : ckpt);
      log()->warn("{}", message);
    }
    const double elapsed = since(start);
    std::string summary = fmt::format("{} {} steps in {}: final loss {:.4f}", stop_signal ? "stopped after" : "done:",
                                      done, format_duration(elapsed), last_loss);
    if (last_accuracy_) summary += fmt::format(", test accuracy {:.2f}%", *last_accuracy_ * 100);
    summary += fmt::format(", {} samples/s", format_count(samples_total / std::max(since(loop_start), 1e-9)));
    progress_.line(summary);
    stop_everyone(message);
  } catch (const std::exception& e) {
    fail(blame(runtime_.rank()), e.what());
  }
  return 0;
}

}  // namespace braid::runtime
