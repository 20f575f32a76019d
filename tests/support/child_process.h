// A child process for tests that need a real process boundary (a peer killed with SIGKILL, one that
// exits in the middle of a call): spawned with the test's environment, killed (if still alive) and reaped
// by the destructor, so no test leaves a process behind.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace braid::testing {

class ChildProcess {
 public:
  ChildProcess(const std::string& exe, const std::vector<std::string>& args) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, exe.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("could not spawn " + exe);
    }
  }
  ~ChildProcess() { kill_now(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace braid::testing
