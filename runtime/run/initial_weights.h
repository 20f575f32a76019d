// model.init_from: a trainer's module starts from weights in a safetensors file (Hugging Face's format,
// nn/safetensors.h) instead of its init_seed draw, e.g. weights that PyTorch or another braid job exported.
#pragma once

#include "nn/module.h"
#include "runtime/job/job_spec.h"

namespace braid::runtime {

// Loads spec.init_from into `model`. Names are matched with DDP's "module." levels taken out, so a file
// written from a plain module fits a model that wraps a part of itself in DDP. spec.strict: the file holds
// exactly the module's keys (PyTorch's "Missing key(s) in state_dict" / "Unexpected key(s) in state_dict"
// otherwise); either way shapes must match and a dtype is converted to the parameter's. InvalidArgument
// "model.init_from: <file>: <reason>", and the module is unchanged, on any failure.
void load_initial_weights(nn::Module& model, const ModelSpec& spec);

}  // namespace braid::runtime
