// What a rank's wait status means, in the launcher's words and as the launcher's own exit code.
#pragma once

#include <string>

namespace braid::runtime::launcher {

// The exit code a shell would report for a process with this wait status: the code it exited with, or
// 128 + the signal that killed it (so a rank killed by SIGKILL makes the launcher exit 137).
int exit_code_of(int wait_status);

// True when the process exited with code 0.
bool succeeded(int wait_status);

// "exited with code 3", "killed by SIGKILL", "killed by SIGSEGV (core dumped)".
std::string describe_exit(int wait_status);

// "SIGTERM" for 15; "signal 42" for a number without a name.
std::string signal_name(int signal);

}  // namespace braid::runtime::launcher
