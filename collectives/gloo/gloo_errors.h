// Turning gloo's exceptions into braid's error types.
//
// gloo throws ::gloo::IoException for transport failures, including its own timeouts ("Timed out
// waiting ...ms for recv operation to complete"; a timeout also closes every pair of that context,
// so the context is unusable afterwards, which matches braid's sticky errors), ::gloo::EnforceNotMet
// for violated invariants, and lets exceptions of the rendezvous store pass through.
#pragma once

#include <string>

#include "base/deadline.h"

namespace braid::collectives::gloo {

// Call from inside a catch block. braid errors pass unchanged; a gloo timeout (or any gloo failure once
// `deadline` has passed) becomes TimeoutError, everything else CommError; the message is
// "<what>: <gloo's message>".
[[noreturn]] void rethrow_as_braid_error(const std::string& what, const Deadline& deadline);

}  // namespace braid::collectives::gloo
