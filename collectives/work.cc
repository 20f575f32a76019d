#include "collectives/work.h"

namespace braid::collectives {

Work::Work(std::string what, std::chrono::milliseconds default_timeout)
    : future_(std::move(what)), default_timeout_(default_timeout) {}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  future_.value(timeout.value_or(default_timeout_));
}

}  // namespace braid::collectives
