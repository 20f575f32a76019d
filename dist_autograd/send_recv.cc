#include "dist_autograd/send_recv.h"

#include <atomic>

#include <fmt/format.h>

#include "base/check.h"
#include "rpc/api.h"

namespace braid::dist_autograd {

namespace {
thread_local BackwardPass* t_pass = nullptr;
thread_local bool t_internal_call = false;
}  // namespace

SendRpcBackward::SendRpcBackward(std::vector<autograd::Edge> edges) : Node(std::move(edges)) {
  set_num_inputs(static_cast<uint32_t>(next_edges().size()));
}

RecvRpcBackward::RecvRpcBackward(int64_t context_id, int64_t message_id, int sender)
    : context_id_(context_id), message_id_(message_id), sender_(sender) {}

autograd::TensorList RecvRpcBackward::apply(autograd::TensorList&& grads) {
  BackwardPass* pass = current_pass();
  BRAID_CHECK_ARG(pass != nullptr,
                  "RecvRpcBackward (context {}, message {} from worker {}): a graph that crosses RPC must be run "
                  "with dist_autograd::backward(context_id, roots), not with a local backward()", context_id_,
                  message_id_, sender_);
  BRAID_CHECK_ARG(pass->context_id() == context_id_,
                  "RecvRpcBackward: a tensor received in context {} was used in a backward pass of context {}",
                  context_id_, pass->context_id());
  pass->propagate(sender_, message_id_, grads);
  return {};
}

void BackwardPass::propagate(int to, int64_t message_id, const autograd::TensorList& grads) {
  rpc::ValueList values;
  values.reserve(grads.size());
  for (const auto& g : grads) values.push_back(g.defined() ? rpc::Value(g) : rpc::Value());
  InternalCallScope internal;
  rpc::RpcAgent& agent = rpc::current_agent();
  Future<rpc::Value> f = agent.call_async(agent.worker(to), kPropagateFunction,
                                          {rpc::Value(context_id_), rpc::Value(message_id), rpc::Value(values)});
  std::lock_guard<std::mutex> lock(mu_);
  sent_.push_back(std::move(f));
}

Future<rpc::Value> BackwardPass::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return when_all(sent_, fmt::format("distributed backward of context {}", context_id_));
}

BackwardPass* current_pass() { return t_pass; }

PassScope::PassScope(BackwardPass* pass) : prev_(t_pass) { t_pass = pass; }
PassScope::~PassScope() { t_pass = prev_; }

Future<rpc::Value> when_all(const std::vector<Future<rpc::Value>>& futures, std::string what) {
  Future<rpc::Value> all(std::move(what));
  if (futures.empty()) {
    all.set_value(rpc::Value());
    return all;
  }
  struct Count {
    std::atomic<size_t> left;
    std::atomic<bool> failed{false};
  };
  auto count = std::make_shared<Count>();
  count->left = futures.size();
  for (const auto& f : futures) {
    f.add_callback([all, count](const Future<rpc::Value>& done) {
      if (auto err = done.error()) {
        if (!count->failed.exchange(true)) all.set_error(err);
      }
      if (count->left.fetch_sub(1) == 1 && !count->failed.load()) all.set_value(rpc::Value());
    });
  }
  return all;
}

InternalCallScope::InternalCallScope() : prev_(t_internal_call) { t_internal_call = true; }
InternalCallScope::~InternalCallScope() { t_internal_call = prev_; }
bool InternalCallScope::active() { return t_internal_call; }

}  // namespace braid::dist_autograd
