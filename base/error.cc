#include "base/error.h"

#include <utility>

namespace braid {

RemoteError::RemoteError(std::string worker, std::string remote_message)
    : Error("error on remote worker '" + worker + "': " + remote_message),
      worker_(std::move(worker)),
      remote_message_(std::move(remote_message)) {}

}  // namespace braid
