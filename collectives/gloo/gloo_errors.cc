#include "collectives/gloo/gloo_errors.h"

#include <gloo/common/error.h>

#include <exception>

#include "base/check.h"

namespace braid::collectives::gloo {

namespace {

bool near_deadline(const Deadline& deadline, Clock::time_point started) {
  if (deadline.is_never()) return false;
  const auto budget = deadline.at() - started;
  return Clock::now() >= deadline.at() - budget / 10;
}

}  // namespace

void rethrow_as_braid_error(const std::string& what, const Deadline& deadline, Clock::time_point started) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const ::gloo::IoException& e) {
    const std::string message = e.what();
    if (message.find("Timed out") != std::string::npos || deadline.expired()) {
      BRAID_THROW(TimeoutError, "{}: timed out in gloo: {}", what, message);
    }
    if (near_deadline(deadline, started)) {
      BRAID_THROW(TimeoutError, "{}: timed out: a peer closed its connections at the end of the op's time "
                  "budget, as gloo does when it times out (gloo: {})", what, message);
    }
    BRAID_THROW(CommError, "{}: gloo transport failure: {}", what, message);
  } catch (const std::exception& e) {
    if (deadline.expired()) BRAID_THROW(TimeoutError, "{}: timed out in gloo: {}", what, e.what());
    BRAID_THROW(CommError, "{}: gloo failed: {}", what, e.what());
  }
}

}  // namespace braid::collectives::gloo
