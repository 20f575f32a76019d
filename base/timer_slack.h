// Linux rounds a thread's sleeps up by its timer slack (50 µs by default), which makes the short first
// sleeps of a backoff (1-10 µs) as long as its cap. The engines' waiting threads lower their own slack to
// 1 µs once; the setting is per thread and affects nothing else.
#pragma once

#include <sys/prctl.h>

namespace braid {

inline void tighten_timer_slack() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
}

}  // namespace braid
