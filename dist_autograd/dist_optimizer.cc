#include "dist_autograd/dist_optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "autograd/variable.h"
#include "base/check.h"
#include "base/future.h"
#include "dist_autograd/remote_classes.h"
#include "rpc/api.h"
#include "tensor/factory.h"

namespace braid::dist_autograd {

using rpc::Args;
using rpc::Value;

namespace {

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const RemoteError& e) {
    return e.remote_message();  // the worker is named by the caller
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// A method call on the object behind `rref`; an error thrown at once (e.g. the agent is down) becomes the
// future's, so that the callers still wait for the calls already under way.
Future<Value> call_method(const rpc::RRef& rref, const std::string& method, const Args& args) {
  try {
    return rref.rpc_async().call(method, args);
  } catch (...) {
    Future<Value> failed("DistributedOptimizer " + method);
    failed.set_error(std::current_exception());
    return failed;
  }
}

// Waits for every future (they run in parallel, so one deadline bounds them all), then throws RemoteError
// for the first failure, listing the other failed workers.
std::vector<Value> wait_all(const std::vector<Future<Value>>& futures, const std::vector<rpc::WorkerInfo>& workers,
                            const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + rpc::current_agent().default_timeout() + rpc::Millis(5000);
  std::vector<Value> values(futures.size());
  std::vector<std::pair<std::string, std::string>> failures;  // (worker, message)
  for (size_t i = 0; i < futures.size(); ++i) {
    try {
      const auto left = std::chrono::duration_cast<rpc::Millis>(deadline - std::chrono::steady_clock::now());
      values[i] = futures[i].value(std::max(left, rpc::Millis(0)));
    } catch (...) {
      failures.emplace_back(workers[i].name, message_of(std::current_exception()));
    }
  }
  if (failures.empty()) return values;
  std::string others;
  if (failures.size() > 1) {
    std::vector<std::string> names;
    for (size_t i = 1; i < failures.size(); ++i) names.push_back("'" + failures[i].first + "'");
    others = fmt::format(" (workers {} failed too)", fmt::join(names, ", "));
  }
  throw RemoteError(failures[0].first, fmt::format("{}: {}{}", what, failures[0].second, others));
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(OptimizerOptions options, const std::vector<rpc::RRef>& params)
    : options_(std::move(options)) {
  const std::string kind = optimizer_kind(options_);
  BRAID_CHECK_ARG(!params.empty(), "DistributedOptimizer({}): the parameter list is empty", kind);
  for (size_t i = 0; i < params.size(); ++i) {
    BRAID_CHECK_ARG(params[i].defined(), "DistributedOptimizer({}): parameter RRef {} is null", kind, i);
  }
  // Check the options here, on a stand-in parameter, so that bad options fail before anything is sent.
  {
    Tensor probe = zeros({1});
    autograd::set_requires_grad(probe, true);
    make_optimizer(options_, {probe});
  }
  register_remote_classes();

  // Group by owner, owners in order of first appearance.
  std::vector<rpc::WorkerInfo> owners;
  std::vector<rpc::ValueList> groups;
  for (const rpc::RRef& p : params) {
    const rpc::WorkerInfo owner = p.owner();
    auto it = std::find(owners.begin(), owners.end(), owner);
    if (it == owners.end()) {
      owners.push_back(owner);
      groups.emplace_back();
      it = owners.end() - 1;
    }
    groups[static_cast<size_t>(it - owners.begin())].emplace_back(p);
  }

  const Value encoded = encode_optimizer_options(options_);
  std::vector<Future<Value>> made;
  for (size_t i = 0; i < owners.size(); ++i) {
    optimizers_.push_back(rpc::remote(owners[i], kLocalOptimizerClass, {encoded, rpc::list(groups[i])}));
  }
  // remote() returns at once; a method call on each waits for its creation and surfaces its error.
  for (const rpc::RRef& o : optimizers_) made.push_back(call_method(o, "num_params", {}));
  wait_all(made, owners, fmt::format("DistributedOptimizer: creating the {} optimizer failed", kind));
}

std::vector<rpc::WorkerInfo> DistributedOptimizer::owners() const {
  std::vector<rpc::WorkerInfo> out;
  for (const rpc::RRef& o : optimizers_) out.push_back(o.owner());
  return out;
}

void DistributedOptimizer::step(int64_t context_id) {
  std::vector<Future<Value>> steps;
  steps.reserve(optimizers_.size());
  for (const rpc::RRef& o : optimizers_) steps.push_back(call_method(o, "step", {Value(context_id)}));
  wait_all(steps, owners(), fmt::format("DistributedOptimizer.step(context_id={}) failed", context_id));
}

void DistributedOptimizer::step(int64_t context_id, const StepTurn& turn) {
  const Value encoded = encode_step_turn(turn);
  std::vector<Future<Value>> steps;
  steps.reserve(optimizers_.size());
  for (const rpc::RRef& o : optimizers_) steps.push_back(call_method(o, "step_in_turn", {Value(context_id), encoded}));
  wait_all(steps, owners(),
           fmt::format("DistributedOptimizer.step(context_id={}, step {} micro-batch {} participant {} of {}) failed",
                       context_id, turn.step, turn.microbatch, turn.participant, turn.num_participants));
}

}  // namespace braid::dist_autograd
