// Fault injection for testing failure handling (tests/faults/fault_matrix.py): BRAID_FAULT makes a chosen
// rank raise a signal on itself when it reaches a named point of a job, so that a test can hit a phase
// (rendezvous, forward, the allreduce, an RPC, a checkpoint write, shutdown) deterministically instead of
// racing a `kill` from outside. Off unless BRAID_FAULT is set: an unarmed point costs one relaxed atomic load.
//
//   BRAID_FAULT=POINT:RANK:SIGNAL[:NTH[:RUN]][,...]
//     POINT   a name passed to point() below (docs/RUNTIME.md lists where each one sits, per role)
//     RANK    the rank that faults (the launcher's rank, as arm() is given it)
//     SIGNAL  kill (SIGKILL), stop (SIGSTOP), term (SIGTERM), abrt (SIGABRT), or a number
//     NTH     the reach of the point that faults, counted per point in this process (default 1)
//     RUN     the run of a restarted job it faults in: 0 the first, 1 the first restart (BRAID_RESTART_COUNT),
//             ... (default 0, so that a restarted job does not fault again)
//
// Before it raises the signal the process writes one line to stderr:
//   braid fault: rank 2 raises SIGKILL at 'forward' (reach 1) at unix time 1764390000.123
// (write(2), not the logger: the process is about to die and the test reads the time from it).
#pragma once

#include <string>
#include <string_view>

namespace braid::fault {

// Parses BRAID_FAULT (InvalidArgument naming the entry when it is malformed) and arms the points for this
// process as `rank` in run `run` of the job (its restart count). Without BRAID_FAULT it does nothing. Call
// once, early (braid run does, per rank).
void arm(int rank, int run = 0);
// Arms from a spec string rather than the environment (tests); an empty spec disarms.
void arm_from(const std::string& spec, int rank, int run = 0);

// A fault point: raises the configured signal on this process when BRAID_FAULT names `name` and this rank
// and this is the configured reach of `name`. Returns (at once) otherwise, or after a SIGSTOP is continued.
void point(std::string_view name);

// Whether any fault is armed in this process.
bool armed();

}  // namespace braid::fault
