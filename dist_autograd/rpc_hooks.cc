#include "dist_autograd/rpc_hooks.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "base/check.h"
#include "base/logging.h"
#include "dist_autograd/context_state.h"
#include "dist_autograd/release.h"
#include "dist_autograd/send_recv.h"
#include "rpc/api.h"
#include "rpc/call_hooks.h"
#include "rpc/wire.h"

namespace braid::dist_autograd {

namespace {

constexpr size_t kExtBytes = 16;
std::atomic<int64_t> g_next_message_id{1};

struct ExtIds {
  int64_t context_id;
  int64_t message_id;
};

std::vector<uint8_t> encode_ext(int64_t context_id, int64_t message_id) {
  std::vector<uint8_t> out(kExtBytes);
  std::memcpy(out.data(), &context_id, 8);
  std::memcpy(out.data() + 8, &message_id, 8);
  return out;
}

ExtIds decode_ext(const rpc::Message& msg) {
  BRAID_CHECK_TYPED(rpc::WireError, msg.ext.size() == kExtBytes,
                    "dist_autograd: rpc {} #{} carries a {}-byte extension (expected {}: context id, message id)",
                    rpc::message_type_name(msg.type), msg.id, msg.ext.size(), kExtBytes);
  ExtIds ids{};
  std::memcpy(&ids.context_id, msg.ext.data(), 8);
  std::memcpy(&ids.message_id, msg.ext.data() + 8, 8);
  return ids;
}

// Marks the message's tensors that require grad, records one send function for them in `ctx`, and
// attaches the context to the message (also when nothing requires grad: the callee then runs inside the
// context, so that what it sends back is recorded).
void attach_send(ContextState& ctx, int peer, rpc::Message& msg) {
  ctx.add_known_worker(peer);
  const int64_t message_id = g_next_message_id.fetch_add(1, std::memory_order_relaxed);
  std::vector<autograd::Edge> edges;
  if (autograd::GradMode::is_enabled()) {
    msg.requires_grad.assign(msg.tensors.size(), 0);
    for (size_t i = 0; i < msg.tensors.size(); ++i) {
      const bool has_source = i < msg.sources.size() && msg.sources[i].defined();
      const Tensor& t = has_source ? msg.sources[i] : msg.tensors[i];
      if (!autograd::requires_grad(t)) continue;
      msg.requires_grad[i] = 1;
      edges.push_back(autograd::gradient_edge(t));
    }
  }
  if (edges.empty()) {
    msg.requires_grad.clear();
  } else {
    ctx.add_send_function(message_id, std::make_shared<SendRpcBackward>(std::move(edges)));
  }
  msg.ext = encode_ext(ctx.id(), message_id);
}

// Makes the flagged tensors outputs of a RecvRpcBackward, before the message is decoded into values.
void attach_recv(int64_t context_id, int64_t message_id, int peer, rpc::Message& msg) {
  std::shared_ptr<RecvRpcBackward> recv;
  uint32_t output = 0;
  for (size_t i = 0; i < msg.requires_grad.size() && i < msg.tensors.size(); ++i) {
    if (msg.requires_grad[i] == 0) continue;
    if (!recv) recv = std::make_shared<RecvRpcBackward>(context_id, message_id, peer);
    msg.tensors[i] = autograd::set_history(msg.tensors[i], recv, output++);
  }
}

class IncomingAutogradCall final : public rpc::IncomingCall {
 public:
  explicit IncomingAutogradCall(std::shared_ptr<ContextState> ctx) : ctx_(std::move(ctx)) {}

  std::shared_ptr<void> enter() override { return std::make_shared<CurrentContextScope>(ctx_); }

  void on_send_reply(int peer, rpc::Message& reply) override { attach_send(*ctx_, peer, reply); }

 private:
  std::shared_ptr<ContextState> ctx_;
};

class AutogradCallHooks final : public rpc::CallHooks {
 public:
  void on_send_request(int peer, rpc::Message& request) override {
    if (InternalCallScope::active()) return;
    auto ctx = current_context_state();
    if (ctx) attach_send(*ctx, peer, request);
  }

  std::shared_ptr<rpc::IncomingCall> on_receive_request(int peer, rpc::Message& request) override {
    const ExtIds ids = decode_ext(request);
    auto ctx = ContextTable::instance().get_or_create(ids.context_id);
    ctx->add_known_worker(peer);
    attach_recv(ids.context_id, ids.message_id, peer, request);
    return std::make_shared<IncomingAutogradCall>(std::move(ctx));
  }

  void on_receive_reply(int peer, rpc::Message& reply) override {
    const ExtIds ids = decode_ext(reply);
    // A reply that arrives after its context was released carries plain tensors.
    if (ContextTable::instance().find(ids.context_id)) attach_recv(ids.context_id, ids.message_id, peer, reply);
  }
};

// Runs this worker's part of a backward pass from the send function that `message_id` names.
Future<rpc::Value> propagate_gradients(const rpc::Args& args) {
  const int64_t context_id = args.at(0).as_int();
  const int64_t message_id = args.at(1).as_int();
  const rpc::ValueList& values = args.at(2).items();
  auto ctx = ContextTable::instance().retrieve(context_id);
  auto send = ctx->send_function(message_id);
  BRAID_CHECK_ARG(send != nullptr,
                  "dist_autograd: context {} on worker '{}' recorded no send function for message {} (gradients "
                  "arrived for a message this worker did not send)", context_id, rpc::get_worker_info().name,
                  message_id);
  BRAID_CHECK_ARG(values.size() == send->num_inputs(),
                  "dist_autograd: {} gradients arrived for message {} of context {}, which sent {} tensors that "
                  "require grad", values.size(), message_id, context_id, send->num_inputs());
  std::vector<autograd::Edge> roots;
  autograd::TensorList grads;
  for (size_t i = 0; i < values.size(); ++i) {
    roots.push_back(autograd::Edge{send, static_cast<uint32_t>(i)});
    grads.push_back(values[i].is(rpc::Value::Kind::None) ? Tensor() : values[i].as_tensor());
  }
  auto pass = std::make_shared<BackwardPass>(context_id);
  {
    PassScope scope(pass.get());
    autograd::run_backward(roots, grads, autograd::BackwardOptions{/*retain_graph=*/true, &ctx->sink()});
  }
  // `pass` lives until its propagations are answered (the future's callbacks hold it).
  Future<rpc::Value> done = pass->done();
  done.add_callback([pass](const Future<rpc::Value>&) {});
  return done;
}

Future<rpc::Value> release_context(const rpc::Args& args) {
  const int64_t context_id = args.at(0).as_int();
  const int from = static_cast<int>(args.at(1).as_int());
  return release_everywhere(context_id, from);
}

}  // namespace

void ensure_installed() {
  static std::once_flag once;
  std::call_once(once, [] {
    static AutogradCallHooks hooks;
    rpc::install_call_hooks(&hooks);
    auto& registry = rpc::global_registry();
    registry.add_async_function(kPropagateFunction, propagate_gradients);
    registry.add_async_function(kReleaseFunction, release_context);
  });
}

namespace {
// Workers that only serve (never start a context) must still understand calls made inside one.
const bool g_installed_at_start = (ensure_installed(), true);
}  // namespace

}  // namespace braid::dist_autograd
