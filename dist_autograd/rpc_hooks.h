// Distributed autograd's side of RPC: the call hooks (rpc/call_hooks.h) that carry a context with every
// call made inside it and record send/recv functions, and the internal RPC functions that propagate
// gradients and release contexts.
//
// Extension layout (16 bytes, little-endian): context id (int64), message id (int64). Message ids are
// unique per process; a receiver names one back to the worker that recorded it.
#pragma once

namespace braid::dist_autograd {

// Installs the hooks and registers the internal functions in rpc::global_registry(), once per process.
// Every worker that takes part in distributed autograd must have done so before it receives a call made
// inside a context; linking braid::dist_autograd does it at static initialisation, and Context() makes
// sure again.
void ensure_installed();

}  // namespace braid::dist_autograd
