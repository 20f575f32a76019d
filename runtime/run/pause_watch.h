// PauseWatch: notices when this process did not run for a while (SIGSTOP, then SIGCONT; or a machine so
// loaded that the process was starved), so that a rank that wakes from such a pause does not blame the
// peers that gave up on it meanwhile.
//
// Under mpirun, a stopped driver is continued by the launcher's SIGCONT when another rank's watchdog ends
// the job; the driver then finds a peer gone and, without this, would name that peer as the failure.
// One thread ticks every 100 ms on the monotonic clock (which runs on while the process is stopped); a
// tick that comes much later than asked for is a pause. The last one is kept for any thread to read.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace braid::runtime {

class PauseWatch {
 public:
  using Clock = std::chrono::steady_clock;
  struct Pause {
    Clock::duration length;  // how long the process did not run (beyond the tick it asked for)
    Clock::time_point ended;
  };

  // Gaps of at least `threshold` count as pauses.
  explicit PauseWatch(Clock::duration threshold = std::chrono::seconds(1));
  ~PauseWatch();  // stops and joins the thread
  PauseWatch(const PauseWatch&) = delete;
  PauseWatch& operator=(const PauseWatch&) = delete;

  // The last pause any PauseWatch of this process saw, if it ended within `window` of now. A pause of a
  // second is already enough to matter: peers that last heard from this process a few seconds earlier
  // give up on it while it does not run.
  static std::optional<Pause> recent(Clock::duration window);
  // "this process did not run for 5.3 s (stopped, or starved of CPU), until 0.4 s ago", for the pause
  // recent() finds; "" when none.
  static std::string describe_recent(Clock::duration window);
  // How long a pause stays relevant to a job's failure handling: while its peers may still be acting on
  // it (their watchdogs fire failure.timeout_s after they last heard from this process, and the launcher's
  // signals follow), twice failure.timeout_s and 5 s more.
  static Clock::duration window_for(double failure_timeout_s);
  // For tests: records a pause as the thread would.
  static void record(Pause p);

 private:
  void run();
  const Clock::duration threshold_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace braid::runtime
