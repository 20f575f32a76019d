#include "runtime/launcher/exit_status.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstring>

namespace braid::runtime::launcher {

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;  // stopped or continued: not an end, but a caller asking still gets a failure
}

bool succeeded(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with code {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return fmt::format("killed by {}{}", signal_name(WTERMSIG(wait_status)),
                       WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return fmt::format("stopped with wait status {:#x}", wait_status);
}

std::string signal_name(int signal) {
  // sigabbrev_np (glibc 2.32) is thread-safe, unlike strsignal, and gives the short name without "SIG".
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return fmt::format("signal {}", signal);
  return fmt::format("SIG{}", abbrev);
}

}  // namespace braid::runtime::launcher
