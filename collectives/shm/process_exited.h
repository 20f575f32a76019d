// Whether a peer's process on this host is gone, for the shared-memory waits: a crashed peer closes no
// socket here, so its process is all there is to ask.
#pragma once

namespace braid::collectives::shm {

// True when `pid` no longer runs: it does not exist (kill(pid, 0) fails with ESRCH), or it has exited but
// its parent has not reaped it yet. Such a zombie (state Z, or X while it is being reaped) still passes
// kill(pid, 0), and its parent (mpirun, a shell, a launcher that is itself stuck) may take arbitrarily long
// to wait for it, so /proc/<pid>/stat is read too: one open and one read of a small file, cheap enough for
// the waits' periodic check (every 100 ms). False while the process runs, and when this process cannot
// tell (another PID namespace: EPERM, or no /proc).
bool process_exited(int pid);

}  // namespace braid::collectives::shm
