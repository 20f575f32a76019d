// process_exited (collectives/shm/process_exited.h): a peer that has exited counts as gone even while its
// parent has not reaped it (a zombie still passes kill(pid, 0)), and a running process does not.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/shm/process_exited.h"

using braid::collectives::shm::process_exited;

namespace {

// Forks a child that ends by `how` (0: _exit, else that signal), and waits until it has ended without
// reaping it (WNOWAIT): the child stays a zombie until reap() below.
pid_t zombie_child(int how) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (how != 0) ::raise(how);
    ::_exit(0);
  }
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  return child;
}

void reap(pid_t child) {
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
}

}  // namespace

TEST_CASE("process_exited: a running process is not gone", "[collectives][shm]") {
  CHECK_FALSE(process_exited(::getpid()));
  CHECK_FALSE(process_exited(::getppid()));
  CHECK_FALSE(process_exited(0));   // no pid recorded: nothing known
  CHECK_FALSE(process_exited(-1));
}

TEST_CASE("process_exited: an exited but unreaped child (a zombie) counts as gone", "[collectives][shm]") {
  for (int how : {0, SIGKILL}) {
    INFO("the child ended by " << (how == 0 ? "_exit" : "SIGKILL"));
    const pid_t child = zombie_child(how);
    CHECK(::kill(child, 0) == 0);  // what the old check relied on: a zombie still "exists"
    CHECK(process_exited(child));
    reap(child);
    CHECK(process_exited(child));  // reaped: no such process
  }
}
