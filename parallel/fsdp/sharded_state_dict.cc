#include "parallel/fsdp/sharded_state_dict.h"

#include <fmt/format.h>

#include <map>
#include <string>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/error.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {

namespace {

// The full shape of `t` (a parameter handle or buffer of the module) and the rows this rank holds of it.
struct Target {
  Shape full_shape;
  int64_t start_row = 0;
  int64_t rows = 0;  // of this rank; all of them when not sharded
};

Target target_of(const Tensor& t) {
  if (auto unit = unit_of_parameter(t); unit != nullptr && unit->is_sharded()) {
    const auto& params = unit->managed_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].second.is_same(t)) continue;
      const ParamShardSpec& spec = unit->layout().param(i);
      const int rank = unit->group()->rank();
      return {spec.full_shape, spec.shard_start_row(rank), spec.shard_rows(rank)};
    }
  }
  return {t.shape(), 0, t.dim() == 0 ? 0 : t.size(0)};
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The full tensor for `key` from the N dicts' entries.
Tensor assemble(const std::string& key, const std::vector<const Tensor*>& parts, const Shape& full_shape) {
  bool all_full = true;
  int64_t rows = 0;
  for (const Tensor* p : parts) {
    all_full = all_full && p->shape() == full_shape;
    rows += p->dim() == 0 ? 0 : p->size(0);
  }
  if (full_shape.empty() || (all_full && parts.size() > 1 && rows != full_shape[0])) return *parts.front();
  if (parts.size() == 1 && all_full) return *parts.front();
  std::string shapes;
  for (const Tensor* p : parts) shapes += (shapes.empty() ? "" : ", ") + shape_str(p->shape());
  BRAID_CHECK_ARG(rows == full_shape[0],
                  "load_sharded_state_dicts: '{}' is {} in full, but the {} dicts hold {} ({} rows in all): "
                  "neither shards of it nor copies",
                  key, shape_str(full_shape), parts.size(), shapes, rows);
  Tensor full = empty(full_shape, TensorOptions(parts.front()->dtype(), parts.front()->device()));
  int64_t at = 0;
  for (size_t r = 0; r < parts.size(); ++r) {
    const Tensor& p = *parts[r];
    Shape rest_want(full_shape.begin() + 1, full_shape.end());
    Shape rest_got(p.shape().begin() + 1, p.shape().end());
    BRAID_CHECK_ARG(rest_got == rest_want,
                    "load_sharded_state_dicts: '{}' of rank {} is {}; a shard of {} must be [rows, {}]", key, r,
                    shape_str(p.shape()), shape_str(full_shape), fmt::join(rest_want, ", "));
    if (p.size(0) > 0) full.narrow(0, at, p.size(0)).copy_(p);
    at += p.size(0);
  }
  return full;
}

}  // namespace

void load_sharded_state_dicts(nn::Module& module, const std::vector<nn::StateDict>& by_rank, bool strict) {
  BRAID_CHECK_ARG(!by_rank.empty(), "load_sharded_state_dicts: no state dicts given (one per saving rank)");
  std::vector<std::map<std::string, const Tensor*>> index(by_rank.size());
  for (size_t r = 0; r < by_rank.size(); ++r) {
    for (const auto& [k, v] : by_rank[r]) index[r][k] = &v;
  }
  const nn::StateDict mine = module.state_dict();
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source): checked first, then copied
  for (const auto& [key, dest] : mine) {
    std::vector<const Tensor*> parts;
    for (size_t r = 0; r < by_rank.size(); ++r) {
      auto it = index[r].find(key);
      if (it == index[r].end()) {
        BRAID_CHECK_ARG(!strict, "load_sharded_state_dicts: key '{}' is missing from the state dict of rank {}", key,
                        r);
        break;
      }
      parts.push_back(it->second);
    }
    if (parts.size() != by_rank.size()) continue;
    const Target target = target_of(dest);
    const Tensor full = assemble(key, parts, target.full_shape);
    Tensor part = target.full_shape.empty() ? full : full.narrow(0, target.start_row, target.rows);
    BRAID_CHECK_ARG(dest.shape() == part.shape(), "load_sharded_state_dicts: '{}': this rank's part is {}, the module "
                    "holds {}", key, shape_str(part.shape()), shape_str(dest.shape()));
    copies.emplace_back(dest, std::move(part));
  }
  if (strict) {
    for (size_t r = 0; r < by_rank.size(); ++r) {
      for (const auto& [k, v] : by_rank[r]) {
        bool known = false;
        for (const auto& [key, dest] : mine) known = known || key == k;
        BRAID_CHECK_ARG(known, "load_sharded_state_dicts: unexpected key '{}' in the state dict of rank {}", k, r);
      }
    }
  }
  autograd::NoGradGuard no_grad;
  for (auto& [dest, src] : copies) dest.copy_(src);
}

}  // namespace braid::parallel::fsdp
