// Releasing a context on every worker that took part: the worker releases its own state, then tells the
// workers it exchanged messages with (except `from`, who told it), which do the same. A worker that no
// longer holds the context answers at once, so the cascade ends even though the workers know each other
// both ways.
#pragma once

#include <cstdint>

#include "base/future.h"
#include "rpc/value.h"

namespace braid::dist_autograd {

// Completes when every worker reached from here has released `context_id` (or failed to answer: the
// error names it). `from` is the worker that asked (-1 for none).
Future<rpc::Value> release_everywhere(int64_t context_id, int from);

}  // namespace braid::dist_autograd
