// braid::OutOfMemoryError (docs/ERRORS.md), in a header of its own: only the code that allocates tensor
// memory, and the code that names what was being built from it, throws or catches it.
#pragma once

#include "base/error.h"

namespace braid {

// Memory ran out (host or device). Named like torch.OutOfMemoryError; thrown instead of a bare
// std::bad_alloc so that the message says what was being allocated, its size, and, where known, the
// tensor's shape and dtype and what was being built from it (a model, a layer).
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

}  // namespace braid
