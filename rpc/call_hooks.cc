#include "rpc/call_hooks.h"

#include <atomic>

#include "base/check.h"

namespace braid::rpc {

namespace {
std::atomic<CallHooks*> g_hooks{nullptr};
}  // namespace

void install_call_hooks(CallHooks* hooks) {
  BRAID_CHECK_ARG(hooks != nullptr, "install_call_hooks: hooks must not be null");
  CallHooks* expected = nullptr;
  if (g_hooks.compare_exchange_strong(expected, hooks, std::memory_order_acq_rel)) return;
  BRAID_CHECK_ARG(expected == hooks, "install_call_hooks: other call hooks are installed already (one set per process)");
}

CallHooks* call_hooks() { return g_hooks.load(std::memory_order_acquire); }

}  // namespace braid::rpc
