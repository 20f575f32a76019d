#include "parallel/zero/zero_redundancy_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "parallel/control_device.h"
#include "parallel/flat_params.h"
#include "tensor/factory.h"
#include "tensor/ops/shape_ops.h"
#include "tensor/serialize.h"

namespace braid::parallel {
namespace {

using nn::optim::OptimizerStateDict;

// A flat state dict as bytes: per entry [u32 name length][name][u64 tensor bytes][tensor/serialize.h].
std::vector<uint8_t> encode(const nn::StateDict& flat) {
  std::vector<uint8_t> out;
  for (const auto& [name, t] : flat) {
    const auto n = static_cast<uint32_t>(name.size());
    const std::vector<uint8_t> bytes = serialize(t.cpu());
    const auto len = static_cast<uint64_t>(bytes.size());
    const size_t at = out.size();
    out.resize(at + sizeof n + n + sizeof len + bytes.size());
    std::memcpy(out.data() + at, &n, sizeof n);
    std::memcpy(out.data() + at + sizeof n, name.data(), n);
    std::memcpy(out.data() + at + sizeof n + n, &len, sizeof len);
    std::memcpy(out.data() + at + sizeof n + n + sizeof len, bytes.data(), bytes.size());
  }
  return out;
}

nn::StateDict decode(const uint8_t* p, size_t size, int from_rank) {
  nn::StateDict flat;
  size_t at = 0;
  const auto need = [&](size_t n, const char* what) {
    BRAID_CHECK_ARG(size - at >= n, "ZeroRedundancyOptimizer: the state sent by rank {} is truncated at byte {} ({})",
                    from_rank, at, what);
  };
  while (at < size) {
    uint32_t n = 0;
    need(sizeof n, "name length");
    std::memcpy(&n, p + at, sizeof n);
    at += sizeof n;
    need(n, "name");
    std::string name(reinterpret_cast<const char*>(p + at), n);
    at += n;
    uint64_t len = 0;
    need(sizeof len, "tensor length");
    std::memcpy(&len, p + at, sizeof len);
    at += sizeof len;
    need(len, "tensor");
    flat.emplace_back(std::move(name), deserialize(std::span<const uint8_t>(p + at, len)));
    at += len;
  }
  return flat;
}

}  // namespace

std::vector<int> partition_parameters(const std::vector<Tensor>& params, int world_size) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<int64_t> sizes(static_cast<size_t>(world_size), 0);
  std::vector<int> owner(params.size(), 0);
  for (size_t i : order) {
    const auto r = static_cast<size_t>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
    owner[i] = static_cast<int>(r);
    sizes[r] += params[i].numel();
  }
  return owner;
}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(const std::vector<std::pair<std::string, Tensor>>& named_params,
                                                 const LocalOptimizerFactory& make_local,
                                                 std::shared_ptr<collectives::ProcessGroup> group)
    : group_(std::move(group)) {
  BRAID_CHECK_ARG(group_ != nullptr, "ZeroRedundancyOptimizer: the process group is null");
  BRAID_CHECK_ARG(!named_params.empty(), "ZeroRedundancyOptimizer: optimizer got an empty parameter list");
  BRAID_CHECK_ARG(make_local != nullptr, "ZeroRedundancyOptimizer: no local optimizer factory");
  for (const auto& [name, p] : named_params) {
    names_.push_back(name);
    params_.push_back(p);
  }
  owner_ = partition_parameters(params_, group_->size());
  // The local order is the partition's (largest first), as torch's local optimizer sees it.
  std::vector<size_t> order(params_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
  std::vector<Tensor> mine;
  std::vector<std::string> my_names;
  for (size_t i : order) {
    if (owner_[i] != group_->rank()) continue;
    local_.push_back(i);
    mine.push_back(params_[i]);
    my_names.push_back(names_[i]);
  }
  // A rank with no parameters (more ranks than parameters) still steps with the others: an optimizer
  // over nothing is refused by the optimizers, so it keeps none.
  if (!mine.empty()) local_optimizer_ = make_local(std::move(mine), std::move(my_names));
}

void ZeroRedundancyOptimizer::step() {
  if (local_optimizer_) local_optimizer_->step();
  broadcast_from_owners();
}

void ZeroRedundancyOptimizer::zero_grad(bool set_to_none) {
  for (const Tensor& p : params_) autograd::zero_grad(p, set_to_none);
}

void ZeroRedundancyOptimizer::broadcast_from_owners() {
  autograd::NoGradGuard no_grad;
  // One flat buffer per (owner, dtype, device): as many broadcasts as owners in the common case.
  std::map<std::tuple<int, DType, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < params_.size(); ++i) {
    groups[{owner_[i], params_[i].dtype(), fmt::format("{}", params_[i].device())}].push_back(i);
  }
  for (const auto& [key, indices] : groups) {
    const int root = std::get<0>(key);
    const Device where = control_device(*group_, params_[indices[0]]);
    const bool mine = group_->rank() == root;
    int64_t total = 0;
    for (size_t i : indices) total += params_[i].numel();
    Tensor flat = mine ? pack_params(params_, indices, where)
                       : Tensor::empty({total}, TensorOptions(std::get<1>(key), where));
    collectives::TensorList ts{flat};
    collectives::BroadcastOptions o;
    o.root_rank = root;
    group_->broadcast(ts, o)->wait();
    if (!mine) unpack_params(flat, params_, indices);
  }
}

void ZeroRedundancyOptimizer::consolidate_state_dict(int to) {
  BRAID_CHECK_ARG(to >= 0 && to < group_->size(),
                  "ZeroRedundancyOptimizer.consolidate_state_dict: rank {} is not in group '{}' of {} ranks", to,
                  group_->name(), group_->size());
  // This rank's share, by global index.
  OptimizerStateDict mine;
  mine.num_params = static_cast<int64_t>(params_.size());
  if (local_optimizer_) {
    const OptimizerStateDict local = local_optimizer_->state_dict();
    mine.options = local.options;
    for (const auto& [li, st] : local.state) mine.state[static_cast<int64_t>(local_[static_cast<size_t>(li)])] = st;
  }
  const std::vector<uint8_t> bytes = encode(mine.to_flat());
  const Device where = control_device(*group_, params_[0]);
  const int ws = group_->size();
  Tensor len = full({1}, static_cast<int64_t>(bytes.size()), TensorOptions(DType::Int64, where));
  Tensor lens = Tensor::empty({ws}, TensorOptions(DType::Int64, where));
  group_->allgather_into_tensor(lens, len)->wait();
  const Tensor lens_cpu = lens.cpu();
  const int64_t* l = lens_cpu.data<int64_t>();
  const int64_t most = *std::max_element(l, l + ws);
  Tensor mine_bytes = zeros({std::max<int64_t>(most, 1)}, DType::UInt8);
  if (!bytes.empty()) std::memcpy(mine_bytes.data_ptr(), bytes.data(), bytes.size());
  Tensor send = mine_bytes.to(where);
  Tensor all = Tensor::empty({ws * send.numel()}, TensorOptions(DType::UInt8, where));
  group_->allgather_into_tensor(all, send)->wait();
  if (group_->rank() != to) {
    consolidated_.reset();
    return;
  }
  const Tensor all_cpu = all.cpu();
  OptimizerStateDict whole;
  whole.num_params = static_cast<int64_t>(params_.size());
  for (int r = 0; r < ws; ++r) {
    const auto* p = all_cpu.data<uint8_t>() + static_cast<size_t>(r) * static_cast<size_t>(send.numel());
    const OptimizerStateDict part = OptimizerStateDict::from_flat(decode(p, static_cast<size_t>(l[r]), r));
    if (whole.options.empty()) whole.options = part.options;
    for (const auto& [gi, st] : part.state) whole.state[gi] = st;
  }
  consolidated_ = std::move(whole);
}

OptimizerStateDict ZeroRedundancyOptimizer::state_dict() const {
  BRAID_CHECK_ARG(consolidated_.has_value(),
                  "ZeroRedundancyOptimizer: Optimizer state has not been consolidated on this rank (rank {} of group "
                  "'{}'). Please call `consolidate_state_dict(to=...)` on all ranks beforehand if you meant to save "
                  "the global state.",
                  group_->rank(), group_->name());
  return *consolidated_;
}

void ZeroRedundancyOptimizer::load_state_dict(const OptimizerStateDict& dict) {
  BRAID_CHECK_ARG(dict.num_params == static_cast<int64_t>(params_.size()),
                  "ZeroRedundancyOptimizer.load_state_dict: the state dict has {} parameters, the optimizer {}",
                  dict.num_params, params_.size());
  if (!local_optimizer_) return;
  OptimizerStateDict local;
  local.num_params = static_cast<int64_t>(local_.size());
  local.options = dict.options;
  for (size_t li = 0; li < local_.size(); ++li) {
    const auto it = dict.state.find(static_cast<int64_t>(local_[li]));
    if (it != dict.state.end()) local.state[static_cast<int64_t>(li)] = it->second;
  }
  local_optimizer_->load_state_dict(local);
}

}  // namespace braid::parallel
