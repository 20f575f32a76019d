#include "dist_autograd/release.h"

#include <fmt/format.h>

#include "dist_autograd/context_state.h"
#include "dist_autograd/send_recv.h"
#include "rpc/api.h"

namespace braid::dist_autograd {

Future<rpc::Value> release_everywhere(int64_t context_id, int from) {
  auto state = ContextTable::instance().erase(context_id);
  if (!state || !rpc::is_initialized()) {
    Future<rpc::Value> none("release of an absent context");
    none.set_value(rpc::Value());
    return none;
  }
  const std::vector<int> known = state->known_workers();
  state.reset();  // the graph (and its saved tensors) goes now, not when the last reply arrives
  rpc::RpcAgent& agent = rpc::current_agent();
  const int self = agent.self().id;
  std::vector<Future<rpc::Value>> asked;
  InternalCallScope internal;
  for (int w : known) {
    if (w == self || w == from) continue;
    asked.push_back(agent.call_async(agent.worker(w), kReleaseFunction,
                                     {rpc::Value(context_id), rpc::Value(int64_t{self})}));
  }
  return when_all(asked, fmt::format("release of distributed autograd context {}", context_id));
}

}  // namespace braid::dist_autograd
