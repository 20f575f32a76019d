#include "collectives/gloo/gloo_errors.h"

#include <gloo/common/error.h>

#include <exception>

#include "base/check.h"

namespace braid::collectives::gloo {

void rethrow_as_braid_error(const std::string& what, const Deadline& deadline) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const ::gloo::IoException& e) {
    const std::string message = e.what();
    if (deadline.expired() || message.find("Timed out") != std::string::npos) {
      BRAID_THROW(TimeoutError, "{}: timed out in gloo: {}", what, message);
    }
    BRAID_THROW(CommError, "{}: gloo transport failure: {}", what, message);
  } catch (const std::exception& e) {
    if (deadline.expired()) BRAID_THROW(TimeoutError, "{}: timed out in gloo: {}", what, e.what());
    BRAID_THROW(CommError, "{}: gloo failed: {}", what, e.what());
  }
}

}  // namespace braid::collectives::gloo
