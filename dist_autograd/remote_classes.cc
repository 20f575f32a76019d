#include "dist_autograd/remote_classes.h"

#include <mutex>

#include "dist_autograd/hosted_module.h"
#include "dist_autograd/local_optimizer.h"
#include "rpc/registry.h"

namespace braid::dist_autograd {

void register_remote_classes() {
  static std::once_flag once;
  std::call_once(once, [] {
    rpc::Registry& registry = rpc::global_registry();
    register_hosted_module_class(registry);
    register_local_optimizer_class(registry);
  });
}

namespace {

// Runs before main in every program that links this object file (see the header): a worker that only
// hosts modules for others then serves them without calling anything itself.
[[maybe_unused]] const bool registered_at_start_up = (register_remote_classes(), true);

}  // namespace

}  // namespace braid::dist_autograd
