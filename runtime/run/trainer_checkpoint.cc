// A trainer's checkpoint file (trainer.h): the model, its optimizer, the remote parts' optimizer state
// (keyed by part) and resume_state.h's entries; read back by a trainer of the same job, or resharded from
// the files of another number of trainers.
//
// Entries: "model.<plain name>", "optimizer.<OptimizerStateDict::to_flat key>",
// "remote_optimizer.<part>.<to_flat key of that part's parameters>" and resume_state.h's. Files written
// before the remote state was keyed by part have "remote_optimizer.<owner index>.<key>": still read.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "nn/serialize.h"
#include "nn/state_dict_file.h"
#include "parallel/fsdp/reshard.h"
#include "rpc/api.h"
#include "runtime/run/checkpoint_writer.h"
#include "runtime/run/trainer.h"
#include "tensor/factory.h"

namespace braid::runtime {

using rpc::Dict;
using rpc::Value;

namespace {

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr const char* kRemotePrefix = "remote_optimizer.";

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// One owner's flat optimizer state ("state.<i>.<name>", "options.<x>", "num_params") cut to a part's.
void append_part_state(const RemoteOptimizerSlot& slot, const Dict& owner_state, nn::StateDict& out) {
  const std::string prefix = std::string(kRemotePrefix) + slot.part + ".";
  for (const auto& [key, v] : owner_state.items) {
    if (starts_with(key, "state.")) {
      const size_t dot = key.find('.', 6);
      const auto index = static_cast<size_t>(env::parse_int(key.substr(6, dot - 6), "remote optimizer state key"));
      if (index < slot.offset || index >= slot.offset + slot.count) continue;
      out.emplace_back(fmt::format("{}state.{}{}", prefix, index - slot.offset, key.substr(dot)), v.as_tensor());
    } else if (key == "num_params") {
      out.emplace_back(prefix + key, scalar_tensor(static_cast<double>(slot.count), DType::Int64));
    } else {
      out.emplace_back(prefix + key, v.as_tensor());
    }
  }
}

// The remote optimizers' state dicts (by owner index) from a checkpoint's "remote_optimizer." entries.
std::map<size_t, Dict> remote_state_by_owner(const std::vector<RemoteOptimizerSlot>& slots,
                                             const std::vector<std::pair<std::string, Tensor>>& entries,
                                             const std::string& path) {
  std::map<size_t, Dict> by_owner;
  std::map<size_t, int64_t> owner_params;
  std::map<std::string, bool> seen;
  for (const auto& [name, t] : entries) {
    const std::string rest = name.substr(std::string(kRemotePrefix).size());
    // The longest part name that prefixes the rest (a part's name may hold dots).
    const RemoteOptimizerSlot* slot = nullptr;
    for (const auto& s : slots) {
      if (starts_with(rest, s.part + ".") && (slot == nullptr || s.part.size() > slot->part.size())) slot = &s;
    }
    if (slot == nullptr) {
      // The older form: "<owner index>.<key>".
      const size_t dot = rest.find('.');
      BRAID_CHECK_ARG(dot != std::string::npos && !rest.empty() && std::isdigit(static_cast<unsigned char>(rest[0])),
                      "{}: entry '{}' is the optimizer state of a remote part this job does not have (a checkpoint of "
                      "another model?)", path, name);
      const int64_t owner = env::parse_int(rest.substr(0, dot), fmt::format("{}: entry '{}'", path, name));
      BRAID_CHECK_ARG(owner >= 0, "{}: entry '{}' names a negative optimizer index", path, name);
      by_owner[static_cast<size_t>(owner)].set(rest.substr(dot + 1), Value(t));
      continue;
    }
    const std::string key = rest.substr(slot->part.size() + 1);
    seen[slot->part] = true;
    Dict& d = by_owner[slot->owner];
    if (starts_with(key, "state.")) {
      const size_t dot = key.find('.', 6);
      BRAID_CHECK_ARG(dot != std::string::npos, "{}: malformed entry '{}'", path, name);
      const int64_t j = env::parse_int(key.substr(6, dot - 6), fmt::format("{}: entry '{}'", path, name));
      BRAID_CHECK_ARG(j >= 0 && static_cast<size_t>(j) < slot->count,
                      "{}: entry '{}' is the state of parameter {} of remote part '{}', which has {} (a checkpoint of "
                      "another model?)", path, name, j, slot->part, slot->count);
      d.set(fmt::format("state.{}{}", slot->offset + static_cast<size_t>(j), key.substr(dot)), Value(t));
    } else if (key == "num_params") {
      BRAID_CHECK_ARG(t.numel() == 1 && t.item<int64_t>() == static_cast<int64_t>(slot->count),
                      "{}: entry '{}': remote part '{}' has {} parameters here (a checkpoint of another model?)", path,
                      name, slot->part, slot->count);
      owner_params[slot->owner] += static_cast<int64_t>(slot->count);
    } else {
      d.set(key, Value(t));  // options: the same for every part of one optimizer
    }
  }
  for (const auto& s : slots) {
    BRAID_CHECK_ARG(seen.empty() || seen.count(s.part) > 0,
                    "{}: no optimizer state for remote part '{}' (a checkpoint of another model?)", path, s.part);
  }
  for (auto& [owner, n] : owner_params) {
    by_owner[owner].set("num_params", Value(scalar_tensor(static_cast<double>(n), DType::Int64)));
  }
  return by_owner;
}

}  // namespace

std::vector<RemoteOptimizerSlot> remote_optimizer_slots(const std::vector<RemotePartHandle>& parts,
                                                        const std::vector<std::vector<rpc::RRef>>& params,
                                                        const std::vector<rpc::WorkerInfo>& owners) {
  std::vector<RemoteOptimizerSlot> slots;
  std::vector<size_t> next(owners.size(), 0);
  for (size_t k = 0; k < parts.size() && k < params.size(); ++k) {
    if (params[k].empty()) continue;
    const auto it = std::find(owners.begin(), owners.end(), params[k].front().owner());
    BRAID_CHECK_TYPED(Error, it != owners.end(), "remote part '{}': its owner has no optimizer", parts[k].name);
    const auto o = static_cast<size_t>(it - owners.begin());
    slots.push_back({parts[k].name, o, next[o], params[k].size()});
    next[o] += params[k].size();
  }
  return slots;
}

void Trainer::save(const std::string& path, bool async) const {
  nn::StateDict state;
  for (auto& [name, t] : model_->state_dict()) state.emplace_back(kModelPrefix + plain_parameter_name(name), t);
  if (optimizer_) {
    for (auto& [name, t] : optimizer_->state_dict().to_flat()) state.emplace_back(kOptimizerPrefix + name, t);
  }
  // The remote parts' optimizer state lives on their owners: fetched here, so that it is saved (and
  // restored) with the trainer that drives them.
  if (remote_optimizer_) {
    const auto& remotes = remote_optimizer_->remote_optimizers();
    std::vector<Value> owner_states;
    for (const auto& r : remotes) owner_states.push_back(r.rpc_sync().call("state_dict", {}));
    for (const auto& slot : remote_slots_) append_part_state(slot, owner_states.at(slot.owner).as_dict(), state);
  }
  append_resume_state(resume_parts_, state);
  // Parameters and optimizer state change only at the optimizer step (train_step waits for their copy
  // there); buffers (normalization statistics) change in a forward, and a comm hook's state in a
  // backward: those are copied before save returns.
  std::set<std::string> later;
  for (const auto& [name, p] : model_->named_parameters()) later.insert(kModelPrefix + plain_parameter_name(name));
  write_checkpoint_file(path, state, async, [&later](const std::string& name) {
    return later.count(name) > 0 || starts_with(name, kOptimizerPrefix);
  });
}

void Trainer::load(const std::string& path, ResumeScope scope) {
  const nn::StateDict state = nn::load_state_dict_file(path);
  nn::StateDict model_state, optim_state, remote_entries;
  for (const auto& [name, t] : state) {
    if (starts_with(name, kModelPrefix)) {
      model_state.emplace_back(name.substr(6), t);
    } else if (starts_with(name, kOptimizerPrefix)) {
      optim_state.emplace_back(name.substr(10), t);
    } else if (starts_with(name, kRemotePrefix)) {
      remote_entries.emplace_back(name, t);
    } else if (!is_resume_state_key(name)) {  // those: restore_resume_state() below
      BRAID_THROW(InvalidArgument, "{}: unexpected entry '{}' in a trainer checkpoint", path, name);
    }
  }
  // The model's own names may carry DDP's "module." levels: map them from the plain names.
  nn::StateDict mine;
  for (auto& [name, t] : model_->state_dict()) {
    const std::string plain = plain_parameter_name(name);
    const auto it = std::find_if(model_state.begin(), model_state.end(), [&](const auto& e) { return e.first == plain; });
    BRAID_CHECK_ARG(it != model_state.end(), "{}: the checkpoint has no '{}' for trainer {}", path, plain, index_);
    mine.emplace_back(name, it->second);
  }
  const auto remote = remote_state_by_owner(remote_slots_, remote_entries, path);
  try {
    model_->load_state_dict(mine, /*strict=*/true);
  } catch (const std::exception& e) {
    // The model's own message (PyTorch's "size mismatch for ...") does not say which file it read.
    BRAID_THROW(InvalidArgument, "{}: {} (a checkpoint of another model?)", path, e.what());
  }
  if (optimizer_ && !optim_state.empty()) optimizer_->load_state_dict(nn::optim::OptimizerStateDict::from_flat(optim_state));
  restore_resume_state(resume_parts_, state, path, scope);
  restore_remote_optimizers(remote, path);
}

void Trainer::load_resharded(const std::vector<std::string>& shards, const std::string& replica, bool generator) {
  const parallel::fsdp::ShardedFiles files(shards);
  parallel::fsdp::load_sharded_files(
      *model_, files, [](const std::string& key) { return kModelPrefix + plain_parameter_name(key); }, kModelPrefix);
  const auto& first = files.file(0).entries();
  const bool has_optimizer_state = std::any_of(first.begin(), first.end(), [](const auto& e) {
    return starts_with(e.name, kOptimizerPrefix);
  });
  if (optimizer_ && has_optimizer_state) parallel::fsdp::load_sharded_optim_files(*optimizer_, files, kOptimizerPrefix);
  // What is per trainer (the generator, the remote parts' optimizer state) comes from the replica's file,
  // and only those entries are read of it.
  const nn::StateDictFile own(replica);
  nn::StateDict resume, remote_entries;
  for (const auto& e : own.entries()) {
    if (e.name == "rng.default") {
      resume.emplace_back(e.name, own.read(e.name));
    } else if (starts_with(e.name, kRemotePrefix)) {
      remote_entries.emplace_back(e.name, own.read(e.name));
    }
  }
  const auto remote = remote_state_by_owner(remote_slots_, remote_entries, replica);
  // Not DDP's rebuilt buckets: one side of a reshard is FSDP, which has none.
  restore_resume_state(resume_parts_, resume, replica, ResumeScope{generator, /*hooks=*/false});
  restore_remote_optimizers(remote, replica);
  std::vector<std::string> read;
  for (size_t i : files.files_read()) read.push_back(files.file(i).path());
  const double mib = static_cast<double>(files.payload_bytes_read()) / (1 << 20);
  logging::get("braid.run")->info("trainer {}: resharded from {} of {} saved files ({:.1f} MiB read): {}", index_,
                                  read.size(), files.size(), mib, fmt::join(read, ", "));
}

void Trainer::restore_remote_optimizers(const std::map<size_t, rpc::Dict>& by_owner, const std::string& path) {
  if (!remote_optimizer_) return;
  const auto& remotes = remote_optimizer_->remote_optimizers();
  for (const auto& [owner, dict] : by_owner) {
    BRAID_CHECK_ARG(owner < remotes.size(), "{}: remote optimizer {} of {}", path, owner, remotes.size());
    remotes[owner].rpc_sync().call("load_state_dict", {Value(dict)});
  }
}

}  // namespace braid::runtime
