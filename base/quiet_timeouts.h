// QuietTimeouts: while one lives, logging::dump_backtrace() on this thread does nothing. For a wait that
// polls in short slices and expects most of them to time out; the caller dumps once, when it gives up for
// good (a TimeoutError otherwise dumps the log's backtrace as it is thrown: docs/ERRORS.md).
#pragma once

namespace braid::logging {

class QuietTimeouts {
 public:
  QuietTimeouts();
  ~QuietTimeouts();
  QuietTimeouts(const QuietTimeouts&) = delete;
  QuietTimeouts& operator=(const QuietTimeouts&) = delete;

  // Whether one lives on this thread.
  static bool active();
};

}  // namespace braid::logging
