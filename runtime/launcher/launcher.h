// `braid launch`: N ranks of one command on this machine, without MPI (docs/DEPLOY.md).
//
// Each rank is a child process with the torchrun-style variables that braid's env:// rendezvous reads
// (rank_env.h). The launcher runs one poll() loop on one thread: it prefixes the ranks' output line by
// line ("[rank R] ", stdout to stdout, stderr to stderr), forwards SIGINT, SIGTERM, SIGHUP, SIGUSR1 and
// SIGUSR2 to every rank, and when a rank fails it stops the others: SIGTERM (and SIGCONT, for a stopped
// rank), then SIGKILL after kill_timeout; before that SIGTERM it writes "rank R killed by SIGKILL" (or
// "exited with code N") to the file that BRAID_LAUNCH_NOTICE names in every rank's environment, so that
// the ranks can name the failed rank (braid run does). It returns the exit code of the first rank that failed (128 + signal when a signal
// killed it), or 0 when every rank exited 0.
//
// Restarts (max_restarts > 0, torchrun's --max-restarts): once every rank of a failed job has exited, the
// launcher waits restart_backoff and starts all of them again, with BRAID_RESTART_COUNT one higher (braid
// run then resumes from the latest complete checkpoint), and says which restart this is and why: "restart
// 1 of 3 in 1 s: rank 2 (worker) killed by SIGKILL". Not restarted: a job the launcher was told to stop
// (SIGINT, SIGTERM, SIGHUP), and one whose first failed rank exited with code 2, braid's code for a bad
// job file or command line, which no restart can mend.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/deadline.h"

namespace braid::runtime::launcher {

struct LaunchOptions {
  int nprocs = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on master_addr, chosen by the launcher
  bool prefix_output = true;  // false: the ranks write straight to the launcher's stdout and stderr
  // A rank failed: the others get SIGTERM, and SIGKILL when still running this long after it.
  Millis kill_timeout{10'000};
  // The launcher got SIGINT, SIGTERM or SIGHUP: the ranks get it too, and SIGKILL when still running this
  // long after it. Longer than kill_timeout: a braid job checkpoints on SIGTERM before it exits.
  Millis term_timeout{60'000};
  std::vector<std::string> command;  // argv of every rank; command[0] is looked up in PATH
  // What a command named exactly "braid" runs, so that `braid launch -- braid run …` starts this very
  // build rather than whichever braid PATH finds first. Empty: look "braid" up in PATH like any command.
  std::string braid_executable;
  int max_restarts = 0;       // how many times a failed job is started again
  Millis restart_backoff{1'000};  // the wait between a failed job's end and its restart
  // How the launcher's lines name a rank ("rank 2 (worker)"); null: "rank 2".
  std::function<std::string(int rank)> describe_rank;
};

// Exit code 2: a bad job file or command line (braid run's convention); such a failure is not restarted.
inline constexpr int kBadInputExitCode = 2;

// Runs the job to its end and returns the launcher's exit code. Throws InvalidArgument for bad options
// (the message names the option) or a command that cannot be found, and braid::Error when a rank cannot
// be started; ranks already started are then killed before the exception leaves.
int launch(const LaunchOptions& options);

// command[0] as execve needs it: a name with a '/' as it is, any other name searched in `path_env`
// (PATH's syntax; an empty entry is the current directory). Throws InvalidArgument when nothing
// executable is found.
std::string resolve_executable(const std::string& name, const std::string& path_env);

// A TCP port that is free on `addr` right now (bind to port 0, read it back, close). Another process can
// take it before rank 0 binds it; with a few ranks on one machine that window is short.
int pick_free_port(const std::string& addr);

// The path of the running executable (/proc/self/exe).
std::string current_executable();

}  // namespace braid::runtime::launcher
