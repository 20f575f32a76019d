// Sends posted on a gloo unbound buffer and waited for together: the one-step algorithms post a send
// per peer and wait for them all after their receives.
#pragma once

#include <gloo/transport/unbound_buffer.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/deadline.h"
#include "collectives/gloo/gloo_timeout.h"

namespace braid::collectives::gloo {

// An unbound buffer with a count of sends posted on it and not yet waited for.
struct SendSide {
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
  size_t outstanding = 0;

  void send(int peer, uint64_t slot, size_t offset, size_t length) {
    buffer->send(peer, slot, offset, length);
    ++outstanding;
  }
  void wait_all(const Deadline& deadline) {
    for (; outstanding > 0; --outstanding) buffer->waitSend(gloo_timeout(deadline));
  }
};

}  // namespace braid::collectives::gloo
