// Activation checkpointing (torch.utils.checkpoint): trade compute for memory.
//
// checkpoint(fn, inputs, params) runs fn(inputs) without recording — no graph, so none of fn's
// intermediate activations are kept — and returns its outputs as the outputs of one CheckpointNode, which
// keeps only the inputs. When backward reaches that node, it restores the random generators to their
// state at the forward (so dropout draws the same masks), runs fn again with recording on, on detached
// copies of the inputs, and back-propagates the incoming gradients through that fresh graph in a nested
// pass. What the nested pass delivers for the inputs and for `params` becomes the node's output.
//
// `params` are the leaves fn reads besides its inputs (a module's parameters). Their gradients go out
// along the edges the params had when checkpoint() was called, not into their accumulators directly as
// in torch's reentrant variant: a parameter's edge during a forward need not be its accumulator. An FSDP
// unit makes its parameters outputs of its own node while its forward runs, so that every gradient of
// the full parameters meets there before one reduce-scatter; by the time backward recomputes, the
// parameters are leaves again. Routing through the checkpoint node keeps each gradient on the path it
// had in forward, and the outer pass counts the node as one more producer for the parameters' consumer.
// A leaf that requires grad, is read by fn and is in neither list is an error in backward (its gradient
// would otherwise be lost).
//
// Without grad mode, or when nothing in `inputs` or `params` requires grad, fn simply runs.
#pragma once

#include <functional>
#include <vector>

#include "autograd/node.h"
#include "tensor/random.h"

namespace braid::autograd {

using CheckpointFunction = std::function<TensorList(const TensorList& inputs)>;

struct CheckpointOptions {
  // Generators whose state is replayed in the recomputation besides the default generator (a Dropout
  // constructed with its own generator, for one).
  std::vector<Generator*> generators;
};

TensorList checkpoint(const CheckpointFunction& fn, const TensorList& inputs, const TensorList& params = {},
                      const CheckpointOptions& options = {});

// Whether this thread is running a checkpointed function again inside backward. FSDP keeps a unit
// gathered after such a forward, since the unit's backward follows at once, and does not prefetch.
bool in_checkpoint_recompute();

}  // namespace braid::autograd
