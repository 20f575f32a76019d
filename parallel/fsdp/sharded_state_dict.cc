#include "parallel/fsdp/sharded_state_dict.h"

#include <fmt/format.h>

#include <map>
#include <string>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/error.h"
#include "parallel/fsdp/reshard.h"

namespace braid::parallel::fsdp {

namespace {

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

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
    const ShardTarget target = shard_target(dest);
    std::vector<Shape> shapes;
    for (const Tensor* p : parts) shapes.push_back(p->shape());
    const RowPlan plan = plan_rows(fmt::format("load_sharded_state_dicts: '{}'", key), shapes, target);
    Tensor part = assemble_part(plan, target, parts.front()->dtype(), [&](size_t r) { return *parts[r]; });
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
