// One rank of `braid launch`: a child process in a process group of its own.
//
// Why a group of its own: a rank may be a shell that starts the real program (`sh -c '...; sleep 30'`);
// killing the group reaches both, and when the rank's own process exits, what it left running in its
// group is killed, so a finished or stopped rank leaves nothing behind. It also keeps a terminal's
// Ctrl-C away from the ranks: the terminal signals the launcher's group only, and the launcher forwards
// the signal once. PR_SET_PDEATHSIG(SIGKILL) ends the rank if the launcher itself dies without stopping it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runtime/launcher/unique_fd.h"

namespace braid::runtime::launcher {

struct SpawnSpec {
  std::string path;               // the executable, already resolved (execve does no PATH search)
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // "NAME=VALUE" entries, the whole environment
  bool capture_output = true;     // pipes for stdout and stderr; false: the launcher's own are inherited
};

class ChildProcess {
 public:
  // Starts the process with stdin from /dev/null, no blocked signals and SIGPIPE at its default. Throws
  // braid::Error naming the executable and the reason when fork or execve fails; nothing is left running.
  static ChildProcess spawn(const SpawnSpec& spec);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still running is killed with its group and reaped (waiting at most kReapTimeoutMs).
  ~ChildProcess();

  static constexpr int kReapTimeoutMs = 5000;

  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // The wait status (see exit_status.h); meaningful once running() is false.
  int wait_status() const { return wait_status_; }

  // Read ends of the output pipes: stream 1 is stdout, 2 is stderr. Invalid when not captured; the
  // caller closes them (reset()) at end of stream.
  UniqueFd& output(int stream) { return stream == 1 ? stdout_ : stderr_; }

  // Sends `sig` to the child's process group: the child and what it started, as a terminal's Ctrl-C or
  // Slurm's signals to a job step reach every process. Does nothing once the child is reaped: its pid,
  // and so its group id, may then belong to someone else.
  void signal_group(int sig) const;

  // Without blocking: if the child has exited, kills what it left running in its group (SIGKILL), reaps
  // it and returns true; returns false while it runs. True again on later calls.
  bool reap_if_exited();

  // Forgets a child that did not end even after SIGKILL (stuck in the kernel): the destructor then
  // neither signals nor waits for it again. Its process is init's to reap once it ends.
  void abandon() { running_ = false; }

 private:
  ChildProcess() = default;

  pid_t pid_ = -1;
  bool running_ = false;
  int wait_status_ = 0;
  UniqueFd stdout_;
  UniqueFd stderr_;
};

}  // namespace braid::runtime::launcher
