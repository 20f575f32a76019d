// What this host knows of a process by its pid: the one place that reads /proc/<pid>/stat, for the
// shared-memory waits (a crashed peer closes no socket) and for naming the ranks a launcher's signal
// followed (runtime/run/rank_service.cc).
#pragma once

namespace braid {

enum class ProcessState {
  kRunning,  // any state but the ones below
  kStopped,  // T or t: SIGSTOP, or a tracer
  kExited,   // Z or X: exited, not reaped yet (kill(pid, 0) still succeeds on it)
  kGone,     // no such process
  kUnknown   // this process cannot tell: pid <= 0, another PID namespace (EPERM), no /proc
};

// One kill(pid, 0) and, if the process exists, one read of /proc/<pid>/stat: cheap enough for a periodic
// check.
ProcessState process_state(int pid);

}  // namespace braid
