#include "runtime/run/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/env.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "dist_autograd/context.h"
#include "nn/serialize.h"
#include "parallel/fsdp/fully_shard.h"
#include "rpc/api.h"
#include "runtime/models/comm_hook_registry.h"
#include "runtime/models/loss.h"
#include "runtime/models/model_registry.h"
#include "runtime/run/checkpoint_writer.h"
#include "runtime/run/initial_weights.h"
#include "runtime/run/job_runtime.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/train_options.h"

namespace braid::runtime {

using rpc::Args;
using rpc::Dict;
using rpc::Value;
using rpc::ValueList;

std::string plain_parameter_name(const std::string& name) {
  std::string out;
  size_t pos = 0;
  while (pos <= name.size()) {
    const size_t dot = name.find('.', pos);
    const std::string part = name.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    // The last component is the parameter itself ("module" could be a parameter name; keep it).
    if (part != "module" || dot == std::string::npos) out += (out.empty() ? "" : ".") + part;
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return out;
}

Value encode_parts(const std::vector<RemotePartHandle>& parts) {
  ValueList list;
  for (const auto& p : parts) {
    list.push_back(rpc::tuple({Value(p.name), Value(p.remote_device), Value(p.module_class), Value(p.module_rref)}));
  }
  return rpc::list(std::move(list));
}

std::vector<RemotePartHandle> decode_parts(const Value& value) {
  std::vector<RemotePartHandle> parts;
  for (const Value& v : value.items()) {
    const auto& t = v.items();
    parts.push_back({t.at(0).as_string(), t.at(1).as_string(), t.at(2).as_string(), t.at(3).as_rref()});
  }
  return parts;
}

Trainer::Trainer(const JobSpec& job, int index, std::shared_ptr<collectives::ProcessGroup> trainers,
                 const std::vector<RemotePartHandle>& parts)
    : job_(job), device_(process_device()), index_(index), num_trainers_(static_cast<int>(job.roles.trainers.size())), group_(std::move(trainers)) {
  BRAID_CHECK_ARG(!(job.data.uneven && job.ddp.mode == DdpMode::Inside && !job.fsdp.enabled),
                  "{}: data.uneven needs ddp.mode outside or none (join() is the outer DDP's)", job.file);
  for (const auto& p : parts) {
    remote_.push_back(std::make_shared<dist_autograd::RemoteModule>(
        dist_autograd::RemoteModule::from_rref(p.remote_device, p.module_class, p.module_rref)));
  }
  const bool use_ddp = !job.fsdp.enabled && job.ddp.mode != DdpMode::None && num_trainers_ > 1;
  const parallel::DDPOptions ddp_options = make_ddp_options(job.ddp, group_);
  static const nlohmann::json kEmptyObject = nlohmann::json::object();
  static const nlohmann::json kEmptyArray = nlohmann::json::array();
  const nlohmann::json& args = job.model.args.is_object() ? job.model.args : kEmptyObject;
  const nlohmann::json& layers = job.model.layers.is_array() ? job.model.layers : kEmptyArray;
  ModelBuild build{.args = args, .layers = layers, .init_seed = job.model.init_seed, .remote = remote_,
                   .wrap_inside = nullptr};
  if (use_ddp && job.ddp.mode == DdpMode::Inside) {
    build.wrap_inside = [this, ddp_options, &job](std::shared_ptr<nn::Module> sub) -> std::shared_ptr<nn::Module> {
      sub->to(device_);  // DDP's buckets take the device of the parameters it wraps
      auto ddp = std::make_shared<parallel::DistributedDataParallel>(std::move(sub), ddp_options);
      resume_parts_.ddps.push_back(ddp);
      if (!job.ddp.comm_hook.empty()) {
        resume_parts_.hooks.push_back(make_job_comm_hook(job.ddp, ddp_options.process_group));
        ddp->register_comm_hook(resume_parts_.hooks.back());
      }
      return ddp;
    };
  }
  const std::string where = fmt::format("rank {} (trainer {} of {})", job.roles.trainers.at(static_cast<size_t>(index)),
                                        index, num_trainers_);
  model_ = build_model(job.model.kind, build, where);
  // Before DDP or FSDP wraps the module: every trainer reads the same file, so they start equal.
  if (!job.model.init_from.empty()) load_initial_weights(*model_, job.model);
  if (device_.is_cuda()) model_->to(device_);
  if (use_ddp && job.ddp.mode == DdpMode::Outside) {
    ddp_ = std::make_shared<parallel::DistributedDataParallel>(model_, ddp_options);
    resume_parts_.ddps.push_back(ddp_);
    if (!job.ddp.comm_hook.empty()) {
      resume_parts_.hooks.push_back(make_job_comm_hook(job.ddp, group_));
      ddp_->register_comm_hook(resume_parts_.hooks.back());
    }
  }
  if (job.fsdp.enabled) apply_fsdp(*model_, job.fsdp, group_, process_hybrid_shard_groups());

  optimizer_ = make_local_optimizer(job.optimizer, named_params());
  if (!remote_.empty() && job.optimizer.kind != OptimizerKind::None) {
    std::vector<rpc::RRef> params;
    std::vector<std::vector<rpc::RRef>> remote_params;
    for (const auto& r : remote_) {
      remote_params.push_back(r->remote_parameters());
      params.insert(params.end(), remote_params.back().begin(), remote_params.back().end());
    }
    if (!params.empty()) {
      remote_optimizer_ = std::make_unique<dist_autograd::DistributedOptimizer>(remote_optimizer_options(job.optimizer), params);
      remote_slots_ = remote_optimizer_slots(parts, remote_params, remote_optimizer_->owners());
    }
  }

  train_ = make_dataset(job.data, Split::Train);
  BRAID_CHECK_ARG(train_ != nullptr && train_->size() > 0, "{}: data: the training split is empty", job.file);
  test_ = make_dataset(job.data, Split::Test);
  sampler_.emplace(train_->size(), num_trainers_, index_, job.data, job.train.seed);
  logging::get("braid.run")->debug(
      "trainer {} of {}: model {} on {} with {} local parameters, {} remote parts, {} samples", index_, num_trainers_,
      job.model.kind, device_, named_params().size(), remote_.size(), sampler_->num_samples());
}

Trainer::~Trainer() = default;

nn::Module& Trainer::front() {
  BRAID_CHECK_ARG(model_ != nullptr, "trainer {}: used after destroy", index_);
  return ddp_ ? static_cast<nn::Module&>(*ddp_) : *model_;
}

std::vector<std::pair<std::string, Tensor>> Trainer::named_params() const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (!model_) return out;
  for (auto& [name, p] : model_->named_parameters()) out.emplace_back(plain_parameter_name(name), p);
  return out;
}

Value Trainer::info() const {
  Dict d;
  d.set("num_batches", Value(sampler_->num_batches(job_.train.batch_size)));
  d.set("num_samples", Value(sampler_->num_samples()));
  d.set("dataset_size", Value(train_->size()));
  d.set("has_test", Value(test_ != nullptr && test_->size() > 0));
  return Value(std::move(d));
}

Value Trainer::train_step(int64_t step, int64_t epoch, const std::vector<EpochSegment>& before, int64_t batch,
                          bool want_grads) {
  fault::point("forward");  // BRAID_FAULT: a trainer's "forward"
  sampler_->set_epoch(epoch, before, job_.train.batch_size);
  const std::vector<int64_t> indices = sampler_->batch_indices(batch, job_.train.batch_size);
  // Which samples a step read (BRAID_LOG_LEVEL=info,braid.data=debug): the data order, checkable.
  static const auto data_log = logging::get("braid.data");
  if (data_log->should_log(spdlog::level::debug)) {
    data_log->debug("trainer {}: step {} (epoch {}): samples {}", index_, step, epoch + 1, fmt::join(indices, " "));
  }
  const Batch full = train_->gather(indices).to(device_);
  // Micro-batches: rows [begin, end) of the batch.
  const int64_t rows = full.size();
  // data.micro_batch rows each; uneven inputs without a size take two halves of the batch (the torch test
  // of DDP under distributed autograd splits its uneven inputs so).
  int64_t mb = job_.data.micro_batch > 0 ? job_.data.micro_batch : std::max<int64_t>(rows, 1);
  if (job_.data.uneven && job_.data.micro_batch == 0) mb = std::max<int64_t>((rows + 1) / 2, 1);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t b = 0; b < rows; b += mb) ranges.emplace_back(b, std::min(rows, b + mb));
  if (job_.data.uneven && index_ < num_trainers_ / 2 && ranges.size() > 1) ranges.resize(ranges.size() / 2);

  std::optional<parallel::DistributedDataParallel::Join> join;
  if (job_.data.uneven && ddp_) join.emplace(*ddp_, /*divide_by_initial_world_size=*/true, /*enable=*/true);

  const auto params = named_params();
  double loss_sum = 0;
  int64_t samples = 0;
  ValueList micro;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [begin, end] = ranges[i];
    const auto mb_index = static_cast<int64_t>(i);
    const Batch b = full.slice(begin, end);
    dist_autograd::Context ctx;
    const Tensor output = front()(b.inputs).at(0);
    // weighted_sum is the parameter-server job's loss taken literally: each micro-batch's output times the
    // whole batch's values, `(output * mini_batch.values).sum()` (runtime/models/loss.h).
    const Tensor loss = compute_job_loss(job_, output, job_.loss == LossKind::WeightedSum ? full.target : b.target);
    dist_autograd::backward(ctx.id(), {loss});
    const dist_autograd::GradientMap grads = dist_autograd::get_gradients(ctx.id());
    // A checkpoint's copy of the parameters and optimizer state may still run (checkpoint_writer.h).
    process_checkpoint_writer().wait_copied();
    if (optimizer_) {
      nn::optim::ParamGrads pg;
      for (const auto& [name, p] : params) {
        if (const Tensor* g = grads.find(p)) pg.emplace_back(p, *g);
      }
      optimizer_->step_with(pg);
    }
    if (remote_optimizer_) {
      // The remote parts are shared by every trainer: their owners apply the trainers' steps in trainer
      // order, each once every trainer with this micro-batch has finished its backward, and answer when all
      // have stepped, so that no next forward sees a half-updated part (dist_autograd/step_order.h). Runs are
      // therefore reproducible.
      remote_optimizer_->step(ctx.id(), {.step = step,
                                         .microbatch = static_cast<int>(mb_index),
                                         .participant = index_,
                                         .num_participants = num_trainers_,
                                         .num_microbatches = static_cast<int>(ranges.size())});
    }
    const double l = loss.item<double>();
    loss_sum += l * static_cast<double>(end - begin);
    samples += end - begin;
    if (want_grads) {
      Dict g;
      for (const auto& [name, p] : params) {
        if (const Tensor* t = grads.find(p)) g.set(name, Value(t->clone()));
      }
      Dict m;
      m.set("loss", Value(l));
      m.set("grads", Value(std::move(g)));
      micro.emplace_back(std::move(m));
    }
  }
  join.reset();  // the joined ranks' shadow collectives end here, before the next step's
  Dict out;
  out.set("loss", Value(samples > 0 ? loss_sum / static_cast<double>(samples) : 0.0));
  out.set("samples", Value(samples));
  if (want_grads) out.set("microbatches", rpc::list(std::move(micro)));
  return Value(std::move(out));
}

Value Trainer::evaluate() {
  Dict out;
  double loss_sum = 0;
  double correct = 0;
  int64_t samples = 0;
  if (test_ && test_->size() > 0) {
    DataSpec spec = job_.data;
    spec.shuffle = false;
    spec.drop_last = false;
    DistributedSampler s(test_->size(), num_trainers_, index_, spec, job_.train.seed);
    autograd::NoGradGuard no_grad;
    front().eval();
    for (int64_t b = 0; b < s.num_batches(job_.train.batch_size); ++b) {
      const Batch batch = test_->gather(s.batch_indices(b, job_.train.batch_size)).to(device_);
      const Tensor output = front()(batch.inputs).at(0);
      const auto n = static_cast<double>(batch.size());
      loss_sum += compute_job_loss(job_, output, batch.target).item<double>() * n;
      if (test_->num_classes() > 0) correct += accuracy(output, batch.target) * n;
      samples += batch.size();
    }
    front().train();
  }
  out.set("loss_sum", Value(loss_sum));
  out.set("correct", Value(correct));
  out.set("samples", Value(samples));
  out.set("classified", Value(test_ != nullptr && test_->num_classes() > 0));
  return Value(std::move(out));
}

Value Trainer::parameters() const {
  Dict d;
  for (const auto& [name, p] : named_params()) d.set(name, Value(p.clone()));
  return Value(std::move(d));
}

void Trainer::destroy() {
  remote_optimizer_.reset();
  optimizer_.reset();
  resume_parts_ = {};
  ddp_.reset();
  model_.reset();
  remote_.clear();
}

void register_trainer_class(std::function<const JobSpec&()> job_source,
                            std::function<std::shared_ptr<collectives::ProcessGroup>()> group_source) {
  static std::once_flag once;
  std::call_once(once, [&] {
    rpc::global_registry()
        .add_class<Trainer>(kTrainerClass)
        .constructor([job_source, group_source](const Args& a) {
          const JobSpec& job = job_source();
          const std::string mine = to_json(job).dump();
          BRAID_CHECK_ARG(a.at(1).as_string() == mine,
                          "{}: this rank read the job differently from the driver (different file or --set "
                          "options?): driver {} vs here {}",
                          job.file, a.at(1).as_string(), mine);
          RankService::instance().touch();
          return std::make_shared<Trainer>(job, static_cast<int>(a.at(0).as_int()), group_source(),
                                           decode_parts(a.at(2)));
        })
        .method("info", [](Trainer& t, const Args&) { return t.info(); })
        .method("train_step",
                [](Trainer& t, const Args& a) {
                  RankService::instance().touch();
                  RankService::instance().set_status("training", a.at(3).as_int());
                  // (epoch, batch, want_grads, step[, earlier segments of the epoch: [[trainers, batches], ...]])
                  std::vector<EpochSegment> before;
                  if (a.size() > 4) {
                    for (const Value& seg : a.at(4).items()) {
                      before.push_back({static_cast<int>(seg.items().at(0).as_int()), seg.items().at(1).as_int()});
                    }
                  }
                  return t.train_step(a.at(3).as_int(), a.at(0).as_int(), before, a.at(1).as_int(), a.at(2).as_bool());
                })
        .method("evaluate", [](Trainer& t, const Args&) { return t.evaluate(); })
        // The path comes over the network: only inside checkpoint.dir (RankService::checkpoint_file).
        .method("save",
                [](Trainer& t, const Args& a) {
                  // (path[, async]): async returns once the state is copied (default: once written).
                  t.save(RankService::instance().checkpoint_file(a.at(0).as_string(), "Trainer.save"),
                         a.size() > 1 && a.at(1).as_bool());
                  return Value();
                })
        .method("load",
                [](Trainer& t, const Args& a) {
                  // (path[, generator, hooks]): a resume on another trainer count restores less (ResumeScope).
                  ResumeScope scope;
                  if (a.size() > 2) scope = {a.at(1).as_bool(), a.at(2).as_bool()};
                  t.load(RankService::instance().checkpoint_file(a.at(0).as_string(), "Trainer.load"), scope);
                  return Value();
                })
        .method("load_resharded",
                [](Trainer& t, const Args& a) {
                  // ([shard paths], replica path, generator): another trainer count or sharding.
                  std::vector<std::string> shards;
                  for (const Value& v : a.at(0).items()) {
                    shards.push_back(RankService::instance().checkpoint_file(v.as_string(), "Trainer.load_resharded"));
                  }
                  t.load_resharded(shards,
                                   RankService::instance().checkpoint_file(a.at(1).as_string(), "Trainer.load_resharded"),
                                   a.at(2).as_bool());
                  return Value();
                })
        .method("parameters", [](Trainer& t, const Args&) { return t.parameters(); })
        .method("destroy", [](Trainer& t, const Args&) { t.destroy(); return Value(); });
  });
}

}  // namespace braid::runtime
