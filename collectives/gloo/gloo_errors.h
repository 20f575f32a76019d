// Turning gloo's exceptions into braid's error types.
//
// gloo throws ::gloo::IoException for transport failures, including its own timeouts ("Timed out
// waiting ...ms for recv operation to complete"), ::gloo::EnforceNotMet for violated invariants, and
// lets exceptions of the rendezvous store pass through.
//
// A gloo timeout also closes every pair of its context (the context is unusable afterwards, which
// matches braid's sticky errors), so the peers still waiting in the same op see "connection closed"
// instead of a timeout of their own, a few milliseconds before their own deadline. A transport failure
// that arrives in the last tenth of the op's time budget is therefore reported as a timeout too: the
// ranks of one op started it together, so that is where a peer's timeout lands, while a crashed peer
// fails an op anywhere in its budget.
#pragma once

#include <string>

#include "base/deadline.h"

namespace braid::collectives::gloo {

// Call from inside a catch block. braid errors pass unchanged; a gloo timeout, any gloo failure after
// `deadline`, or a transport failure in the last tenth of [started, deadline] becomes TimeoutError,
// everything else CommError; the message is "<what>: <gloo's message>".
[[noreturn]] void rethrow_as_braid_error(const std::string& what, const Deadline& deadline,
                                         Clock::time_point started = Clock::now());

}  // namespace braid::collectives::gloo
