// The braid error hierarchy (docs/ERRORS.md).
//
// Every error braid throws derives from braid::Error. The message names the operation and the values
// involved (ranks, groups, shapes, dtypes, keys) so that a user can act on it without a debugger.
//   InvalidArgument  bad input; the call changed nothing.
//   TimeoutError     a wait ran out; says what it waited for, for how long, and who did not come.
//   CommError        a peer or transport failed; the object that saw it is unusable afterwards.
//   RemoteError      a handler threw on another process; carries that process's name and message.
#pragma once

#include <stdexcept>
#include <string>

namespace braid {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InvalidArgument : public Error {
 public:
  using Error::Error;
};

class TimeoutError : public Error {
 public:
  using Error::Error;
};

class CommError : public Error {
 public:
  using Error::Error;
};

class RemoteError : public Error {
 public:
  RemoteError(std::string worker, std::string remote_message);
  const std::string& worker() const { return worker_; }
  const std::string& remote_message() const { return remote_message_; }

 private:
  std::string worker_;
  std::string remote_message_;
};

// An invariant of braid itself was broken (a bug, not bad input). Never thrown for user errors.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace braid
