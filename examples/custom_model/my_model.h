// A user's own model, registered under the name "my_net" so that a job file can say
//
//   model: {kind: my_net, args: {in: 16, width: 32, out: 4}}
//
// The program that runs such jobs links braid::runtime and this file, and calls register_my_model()
// before handing over to braid's command line (examples/custom_model/README.md).
#pragma once

namespace my_project {

// Adds "my_net" to braid's model registry. Call it once, before the runtime starts.
void register_my_model();

}  // namespace my_project
