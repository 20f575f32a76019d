// Named model instances: a worker keeps the modules it hosts for a job by name ("em", "net": the model's
// remote parts), so that any process of the job can look one up and get its RRef, e.g. to call it or to
// read its state, without going through the driver.
//
//   rpc::RRef em = lookup_instance("worker4", "em");      // from any rank
//   dist_autograd::RemoteModule m = RemoteModule::from_rref("worker4/cpu", "braid.RemoteEM", em);
//
// RPC functions (registered by register_instance_functions()):
//   "braid.register_instance"  (name, RRef owned by the callee) -> None; the driver names each remote part
//   "braid.lookup_instance"    (name) -> the RRef; InvalidArgument naming the worker and the names it holds
//   "braid.instances"          () -> the names held here, sorted
#pragma once

#include <string>
#include <vector>

#include "rpc/rref.h"

namespace braid::runtime {

// This process's table (a worker's): name -> RRef. A name registered twice is an error.
void register_instance(const std::string& name, const rpc::RRef& rref);
rpc::RRef find_instance(const std::string& name);  // InvalidArgument when unknown
std::vector<std::string> instance_names();
void clear_instances();  // at the end of a job

// The RRef of instance `name` on `worker` (an RPC; this process may be the worker itself).
rpc::RRef lookup_instance(const std::string& worker, const std::string& name);

void register_instance_functions();

}  // namespace braid::runtime
