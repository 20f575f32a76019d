// The driver's checkpoints (driver.h): resuming from one (on the same or, for DDP, another world), the
// data cursor it holds, and saving one (asynchronously: committed once every rank has written).
#include "runtime/run/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <ranges>
#include <thread>

#include "base/check.h"
#include "runtime/data/dataset.h"
#include "runtime/run/checkpoint_dir.h"
#include "runtime/run/driver_detail.h"
#include "runtime/run/rank_service.h"
#include "runtime/run/roles.h"

namespace braid::runtime {

using rpc::Args;
using rpc::Value;

using namespace driver_detail;

rpc::ValueList Driver::parts_on(int rank) const {
  rpc::ValueList mine;
  for (const auto& p : parts_) {
    if (p.rank == rank) mine.push_back(rpc::tuple({Value(p.handle.name), Value(p.handle.module_rref)}));
  }
  return mine;
}

int64_t Driver::resume_step() {
  if (!options_.resume && options_.restart_count == 0) return 0;
  const std::string why = options_.restart_count > 0 ? fmt::format("restart {}", options_.restart_count) : "--resume";
  if (job_.checkpoint.dir.empty()) {
    log()->warn("{}: the job sets no checkpoint.dir; starting again from step 0", why);
    return 0;
  }
  const auto ref = read_latest(job_.checkpoint.dir);
  if (!ref) {
    log()->warn("{}: no checkpoint in {} yet; starting from step 0", why, job_.checkpoint.dir);
    return 0;
  }
  const int saved_world = ref->meta.at("world_size").get<int>();
  const std::vector<int> saved_trainers = ref->meta.at("roles").at("trainers").get<std::vector<int>>();
  const size_t saved_n = saved_trainers.size();
  const size_t n = job_.roles.trainers.size();
  const bool resized = saved_world != runtime_.world_size() || saved_n != n;
  // Sharded on either side, and sharded otherwise than saved (another trainer count, another strategy):
  // every trainer reshards from one saved shard group's files.
  const nlohmann::json saved_fsdp = ref->meta.at("job").value("fsdp", nlohmann::json::object());
  const size_t saved_shards = std::min(shard_world(saved_fsdp, saved_n), saved_n);
  const size_t shards = shard_world(to_json(job_).at("fsdp"), n);
  const bool reshard = (saved_shards > 1 || shards > 1) && (saved_shards != shards || resized);
  rpc::ValueList shard_files;
  if (reshard) {
    for (const std::string& f : shard_group_files(*ref)) shard_files.emplace_back(f);
  }
  std::vector<Future<Value>> loads;
  std::vector<int> ranks;
  loads = call_trainers(reshard ? "load_resharded" : "load", [&](size_t t) {
    const std::string replica = rank_state_path(ref->step_dir, saved_trainers[t % saved_n]);
    if (reshard) return Args{rpc::list(shard_files), Value(replica), Value(t < saved_n)};
    if (!resized) return Args{Value(rank_state_path(ref->step_dir, job_.roles.trainers[t]))};
    // Resized, not sharded (DDP: every trainer saved the same model and optimizer): trainer t reads saved
    // trainer t mod N's file, keeps its generator only when that trainer was its own index, and no comm
    // hook state.
    return Args{Value(replica), Value(t < saved_n), Value(saved_n == n)};
  });
  ranks = job_.roles.trainers;
  load_parts(ref->step_dir, ref->meta, loads, ranks);
  wait_all(loads, ranks, fmt::format("loading the checkpoint {}", ref->step_dir));
  const int64_t step = ref->meta.at("step").get<int64_t>();
  cursor_ = read_cursor(ref->meta, step);
  // It is this job's newest checkpoint: one asked for at the same step (a job stopped right after its
  // resume) is this one, not a rewrite of its files by another world.
  last_checkpoint_step_ = step;
  last_checkpoint_dir_ = ref->step_dir;
  if (resized) {
    // The epoch goes on with the samples the saved trainers had not reached (DistributedSampler::set_epoch).
    if (saved_n != n) {
      if (cursor_.batch > 0) cursor_.before.push_back({static_cast<int>(saved_n), cursor_.batch});
      cursor_.batch = 0;
    }
    log()->info("{}: resumed from {} (step {}) on {} trainers; it was saved by {} ({} ranks, now {})", why,
                ref->step_dir, step, n, saved_n, saved_world, runtime_.world_size());
  } else {
    log()->info("{}: resumed from {} (step {})", why, ref->step_dir, step);
  }
  return step;
}

void Driver::load_parts(const std::string& step_dir, const nlohmann::json& meta, std::vector<Future<Value>>& loads,
                        std::vector<int>& ranks) const {
  // Where each part was saved: "parts" in the meta (older checkpoints: on the rank that hosts it now).
  const bool recorded = meta.contains("parts");
  std::map<std::string, int> saved_on;
  if (recorded) saved_on = meta.at("parts").get<std::map<std::string, int>>();
  for (const auto& p : parts_) {
    BRAID_CHECK_ARG(!recorded || saved_on.count(p.handle.name) > 0,
                    "{}: the checkpoint has no remote part '{}' (saved parts: {}; a checkpoint of another model?)",
                    step_dir, p.handle.name, fmt::join(std::views::keys(saved_on), ", "));
    if (!recorded) saved_on[p.handle.name] = p.rank;
  }
  for (int w : job_.roles.workers) {
    // This worker's parts, by the rank whose file holds them.
    std::map<int, rpc::ValueList> by_file;
    for (const auto& p : parts_) {
      if (p.rank != w) continue;
      by_file[saved_on.at(p.handle.name)].push_back(rpc::tuple({Value(p.handle.name), Value(p.handle.module_rref)}));
    }
    if (by_file.empty()) continue;
    // Its generator (dropout in the parts) goes on only where it hosts just what it saved.
    size_t saved_here = 0;
    for (const auto& [name, r] : saved_on) saved_here += r == w ? 1 : 0;
    const bool same_parts =
        by_file.size() == 1 && by_file.begin()->first == w && by_file.begin()->second.size() == saved_here;
    for (auto& [saved_rank, mine] : by_file) {
      if (saved_rank != w) {
        log()->info("remote parts on {} resume from the file rank {} saved", describe_rank(job_, w), saved_rank);
      }
      loads.push_back(rpc::rpc_async(worker_name(w), "braid.load_modules",
                                     {Value(rank_state_path(step_dir, saved_rank)), rpc::list(std::move(mine)),
                                      Value(same_parts)}));
      ranks.push_back(w);
    }
  }
}

Driver::DataCursor Driver::read_cursor(const nlohmann::json& meta, int64_t step) const {
  DataCursor c;
  if (!meta.contains("data")) {  // a checkpoint from before the cursor: epochs of num_batches_ steps
    c.epoch = step / num_batches_;
    c.batch = step % num_batches_;
    return c;
  }
  const nlohmann::json& d = meta.at("data");
  c.epoch = d.at("epoch").get<int64_t>();
  c.batch = d.at("batch").get<int64_t>();
  for (const auto& seg : d.at("before")) c.before.push_back({seg.at(0).get<int>(), seg.at(1).get<int64_t>()});
  return c;
}

int64_t Driver::segment_batches() {
  if (!segment_batches_ || segment_key_ != std::make_pair(cursor_.epoch, cursor_.before)) {
    DistributedSampler s(dataset_size_, static_cast<int>(job_.roles.trainers.size()), 0, job_.data, job_.train.seed);
    s.set_epoch(cursor_.epoch, cursor_.before, job_.train.batch_size);
    segment_batches_ = s.num_batches(job_.train.batch_size);
    segment_key_ = {cursor_.epoch, cursor_.before};
  }
  return *segment_batches_;
}

std::string Driver::save_checkpoint(int64_t step, int64_t epoch) {
  if (job_.checkpoint.dir.empty()) return "";
  // An interval checkpoint of this very step (committed, or still being written).
  if (step == last_checkpoint_step_) return last_checkpoint_dir_;
  if (pending_ && pending_->step == step) return pending_->dir;
  finish_checkpoint(/*block=*/true);  // one checkpoint in flight: the ranks' snapshot buffers are shared
  RankService::instance().set_status("checkpointing", step);
  const bool async = job_.checkpoint.async;
  const std::string dir = make_step_dir(job_.checkpoint.dir, step);
  std::vector<Future<Value>> saves;
  std::vector<int> ranks;
  saves = call_trainers("save", [&](size_t t) { return Args{Value(rank_state_path(dir, job_.roles.trainers[t])), Value(async)}; });
  ranks = job_.roles.trainers;
  for (int w : job_.roles.workers) {
    saves.push_back(rpc::rpc_async(worker_name(w), "braid.save_modules",
                                   {Value(rank_state_path(dir, w)), rpc::list(parts_on(w)), Value(async)}));
    ranks.push_back(w);
  }
  wait_all(saves, ranks, async ? "copying its checkpoint state" : "saving its checkpoint");
  nlohmann::json roles{{"trainers", job_.roles.trainers}, {"workers", job_.roles.workers}};
  if (job_.roles.master) roles["master"] = *job_.roles.master;
  pending_ = PendingCheckpoint{step, dir,
                               nlohmann::json{{"step", step},
                                              {"epoch", epoch},
                                              {"data", cursor_json()},
                                              {"world_size", runtime_.world_size()},
                                              {"roles", roles},
                                              {"parts", parts_json()},
                                              {"job", to_json(job_)}},
                               async ? ranks : std::vector<int>{}};
  finish_checkpoint(/*block=*/!async);
  return dir;
}

void Driver::finish_checkpoint(bool block) {
  while (pending_) {
    // Ask every rank still writing whether it is done; none of them waits for the answer.
    std::vector<Future<Value>> asks;
    for (int r : pending_->writing) {
      asks.push_back(rpc::rpc_async(worker_name(r), "braid.checkpoint_written", {Value(rank_state_path(pending_->dir, r))}));
    }
    const auto answers = wait_all(asks, pending_->writing, fmt::format("writing its checkpoint {}", pending_->dir));
    std::vector<int> still;
    for (size_t i = 0; i < answers.size(); ++i) {
      if (!answers[i].as_bool()) still.push_back(pending_->writing[i]);
    }
    pending_->writing = std::move(still);
    if (pending_->writing.empty()) {
      // A rank may have failed while the writes ran (the heartbeat found it hung, and it was continued
      // since): a job that is failing commits nothing.
      hold_if_failing();
      commit_checkpoint(job_.checkpoint.dir, pending_->dir, pending_->meta, job_.checkpoint.keep);
      log()->info("checkpoint after step {}: {}", pending_->step, pending_->dir);
      last_checkpoint_step_ = pending_->step;
      last_checkpoint_dir_ = pending_->dir;
      pending_.reset();
      return;
    }
    if (!block) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

nlohmann::json Driver::parts_json() const {
  nlohmann::json parts = nlohmann::json::object();
  for (const auto& p : parts_) parts[p.handle.name] = p.rank;
  return parts;
}

nlohmann::json Driver::cursor_json() const {
  nlohmann::json before = nlohmann::json::array();
  for (const EpochSegment& seg : cursor_.before) before.push_back({seg.trainers, seg.batches});
  return {{"epoch", cursor_.epoch}, {"batch", cursor_.batch}, {"before", before}};
}

}  // namespace braid::runtime
