// The RPC classes behind RemoteModule and DistributedOptimizer, which the owning workers construct and
// call: "dist_autograd.RemoteModule" (hosted_module.h) and "dist_autograd.LocalOptimizer"
// (local_optimizer.h), added to rpc::global_registry().
//
// A worker can only own a remote module or optimizer when these are registered in its process before the
// first call for one arrives. register_remote_classes() does it (idempotent, thread-safe); it also runs
// at start-up in every program that uses RemoteModule or DistributedOptimizer (a static initializer in
// the same object file as this function, which those classes reference), so that in the usual SPMD job
// (every worker runs the same program) nothing needs calling. A hosting program that never refers to
// either class must call it before init_rpc.
#pragma once

namespace braid::dist_autograd {

void register_remote_classes();

}  // namespace braid::dist_autograd
