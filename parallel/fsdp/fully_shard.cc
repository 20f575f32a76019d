#include "parallel/fsdp/fully_shard.h"

#include <fmt/format.h>

#include <unordered_set>

#include "base/check.h"
#include "base/error.h"
#include "parallel/control_device.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {

namespace {

// The module's parameters, recursively, skipping submodules that are units already; shared parameters once.
void collect_unmanaged(const nn::Module& module, const std::string& prefix,
                       std::unordered_set<const TensorImpl*>& seen,
                       std::vector<std::pair<std::string, Tensor>>& out) {
  for (const auto& [name, p] : module.named_parameters(/*recurse=*/false)) {
    if (seen.insert(p.unsafe_impl()).second) out.emplace_back(prefix + name, p);
  }
  for (const auto& [name, child] : module.named_children()) {
    if (unit_of_module(*child) != nullptr) continue;
    collect_unmanaged(*child, prefix + name + ".", seen, out);
  }
}

// The buffers of the same modules collect_unmanaged visits.
void collect_unmanaged_buffers(const nn::Module& module, TensorList& out) {
  for (const auto& [name, b] : module.named_buffers(/*recurse=*/false)) out.push_back(b);
  for (const auto& [name, child] : module.named_children()) {
    if (unit_of_module(*child) == nullptr) collect_unmanaged_buffers(*child, out);
  }
}

// sync_module_states: rank 0's values everywhere, one broadcast per tensor, all issued before the waits.
void broadcast_from_rank0(const FSDPUnit& unit) {
  TensorList tensors;
  for (const auto& [name, p] : unit.managed_parameters()) tensors.push_back(p);
  collect_unmanaged_buffers(unit.module(), tensors);
  std::vector<std::shared_ptr<collectives::Work>> works;
  for (const Tensor& t : tensors) {
    TensorList one{t};
    works.push_back(unit.group()->broadcast(one));
  }
  for (auto& w : works) w->wait();
}

int64_t unmanaged_numel(const nn::Module& module) {
  std::unordered_set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> params;
  collect_unmanaged(module, "", seen, params);
  int64_t n = 0;
  for (const auto& [name, p] : params) n += p.numel();
  return n;
}

// A stable fingerprint of the unit (FNV-1a over names, shapes and dtype) and its sizes.
std::vector<int64_t> fingerprint(const FSDPUnit& unit) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  int64_t numel = 0;
  for (const auto& [name, p] : unit.managed_parameters()) {
    mix(fmt::format("{}:{}:[{}];", name, dtype_name(p.dtype()), fmt::join(p.shape(), ",")));
    numel += p.numel();
  }
  return {static_cast<int64_t>(unit.managed_parameters().size()), numel, static_cast<int64_t>(h >> 1),
          static_cast<int64_t>(unit.options().strategy)};
}

// Allgathers the fingerprints; every rank compares every rank with rank 0, so all fail together.
void check_same_on_every_rank(const FSDPUnit& unit) {
  const auto mine = fingerprint(unit);
  const auto n = static_cast<int64_t>(mine.size());
  Tensor in = empty({n}, DType::Int64);
  for (int64_t i = 0; i < n; ++i) in.data<int64_t>()[i] = mine[static_cast<size_t>(i)];
  const Device dev = control_device(*unit.group(), unit.device());
  Tensor out = empty({n * unit.group()->size()}, TensorOptions(DType::Int64, dev));
  in = in.to(dev);
  try {
    unit.group()->allgather_into_tensor(out, in)->wait();
  } catch (const Error& e) {
    BRAID_THROW(InvalidArgument, "fully_shard({}): checking the unit across group '{}' failed: {}", unit.name(),
                unit.group()->name(), e.what());
  }
  out = out.cpu();
  const auto* all = out.data<int64_t>();
  for (int r = 1; r < unit.group()->size(); ++r) {
    for (int64_t i = 0; i < n; ++i) {
      if (all[r * n + i] != all[i]) {
        BRAID_THROW(InvalidArgument,
                    "fully_shard({}): rank {} of group '{}' has a different unit than rank 0 ({} parameters of {} "
                    "elements, strategy {} there; {} parameters of {} elements, strategy {} on rank 0; or the "
                    "names, shapes or dtype differ): every rank must shard the same model the same way",
                    unit.name(), r, unit.group()->name(), all[r * n], all[r * n + 1],
                    to_string(static_cast<ShardingStrategy>(all[r * n + 3])), all[0], all[1],
                    to_string(static_cast<ShardingStrategy>(all[3])));
      }
    }
  }
}

void wrap_bottom_up(nn::Module& module, const std::string& path,
                    const std::shared_ptr<collectives::ProcessGroup>& group, const FSDPOptions& options,
                    const WrapPolicy& policy) {
  for (const auto& [name, child] : module.named_children()) {
    const std::string child_path = path.empty() ? name : path + "." + name;
    if (unit_of_module(*child) != nullptr) continue;
    wrap_bottom_up(*child, child_path, group, options, policy);
    if (unit_of_module(*child) == nullptr && policy(*child, child_path, unmanaged_numel(*child))) {
      fully_shard(*child, group, options, child_path);
    }
  }
}

}  // namespace

std::shared_ptr<FSDPUnit> fully_shard(nn::Module& module, std::shared_ptr<collectives::ProcessGroup> group,
                                      FSDPOptions options, std::string name) {
  if (name.empty()) name = module.type_name();
  BRAID_CHECK_ARG(unit_of_module(module) == nullptr, "fully_shard({}): module {} is already an FSDP unit", name,
                  module.type_name());
  std::unordered_set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Tensor>> params;
  collect_unmanaged(module, "", seen, params);
  auto unit = std::make_shared<FSDPUnit>(module, name, std::move(params), std::move(group), options);
  check_same_on_every_rank(*unit);
  detail::register_unit(unit);
  if (options.sync_module_states) broadcast_from_rank0(*unit);
  unit->shard_parameters();
  module.add_forward_pre_hook([unit](nn::Module&, TensorList& inputs) { unit->pre_forward(inputs); });
  module.add_forward_hook([unit](nn::Module&, const TensorList&, TensorList& outputs) { unit->post_forward(outputs); });
  return unit;
}

WrapPolicy module_type_policy(std::set<std::string> type_names) {
  return [types = std::move(type_names)](const nn::Module& m, const std::string&, int64_t) {
    return types.count(m.type_name()) > 0;
  };
}

WrapPolicy size_based_policy(int64_t min_num_params) {
  return [min_num_params](const nn::Module&, const std::string&, int64_t unwrapped) {
    return unwrapped >= min_num_params;
  };
}

std::shared_ptr<FSDPUnit> apply_fully_shard(nn::Module& root, std::shared_ptr<collectives::ProcessGroup> group,
                                            const FSDPOptions& options, const WrapPolicy& policy) {
  wrap_bottom_up(root, "", group, options, policy);
  return fully_shard(root, std::move(group), options);
}

}  // namespace braid::parallel::fsdp
