#include "runtime/launcher/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/check.h"

namespace braid::runtime::launcher {
namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe(const std::string& what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) BRAID_THROW(Error, "braid launch: pipe for {}: {}", what, std::strerror(errno));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// NULL-terminated char* arrays for execve, built before fork: the child may only call async-signal-safe
// functions, and allocating is not one of them.
std::vector<char*> c_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Runs in the forked child, between fork and execve; never returns. Only async-signal-safe calls.
[[noreturn]] void exec_child(const SpawnSpec& spec, char* const* argv, char* const* envp, pid_t launcher, int dev_null,
                             int out_fd, int err_fd, int error_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher may have died before prctl took effect; then nobody would ever send the signal.
  if (::getppid() != launcher) ::_exit(127);
  ::dup2(dev_null, STDIN_FILENO);
  if (spec.capture_output) {
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
  }
  // The launcher blocks the signals it handles and ignores SIGPIPE; the rank must see them as usual.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(spec.path.c_str(), argv, envp);
  const int err = errno;
  // The launcher reads this to report why; a short write changes nothing about the exit below.
  [[maybe_unused]] const ssize_t n = ::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

}  // namespace

ChildProcess ChildProcess::spawn(const SpawnSpec& spec) {
  BRAID_CHECK_ARG(!spec.argv.empty(), "braid launch: no command to run for '{}'", spec.path);
  std::vector<char*> argv = c_array(spec.argv);
  std::vector<char*> envp = c_array(spec.env);
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) BRAID_THROW(Error, "braid launch: cannot open /dev/null: {}", std::strerror(errno));
  Pipe out, err;
  if (spec.capture_output) {
    out = make_pipe(spec.path + " stdout");
    err = make_pipe(spec.path + " stderr");
  }
  Pipe exec_error = make_pipe(spec.path + " exec status");

  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) BRAID_THROW(Error, "braid launch: cannot start '{}': fork failed: {}", spec.path, std::strerror(errno));
  if (pid == 0) {
    exec_child(spec, argv.data(), envp.data(), launcher, dev_null.get(), out.write.get(), err.write.get(),
               exec_error.write.get());
  }

  ChildProcess child;
  child.pid_ = pid;
  child.running_ = true;
  // The child calls setpgid too; whichever runs first wins, and signal_group() works as soon as we return.
  ::setpgid(pid, pid);
  exec_error.write.reset();
  out.write.reset();
  err.write.reset();
  child.stdout_ = std::move(out.read);
  child.stderr_ = std::move(err.read);

  // The write end closes on execve (O_CLOEXEC): zero bytes mean the program is running. This read ends as
  // soon as the child either execs or exits, which it does right away.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error.read.get(), &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    // The destructor of `child` reaps the failed child.
    BRAID_THROW(Error, "braid launch: cannot execute '{}': {}", spec.path, std::strerror(exec_errno));
  }
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      running_(std::exchange(other.running_, false)),
      wait_status_(other.wait_status_),
      stdout_(std::move(other.stdout_)),
      stderr_(std::move(other.stderr_)) {}

ChildProcess::~ChildProcess() {
  if (!running_) return;
  signal_group(SIGKILL);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReapTimeoutMs);
  while (!reap_if_exited() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ChildProcess::signal_group(int sig) const {
  if (!running_) return;
  // ESRCH (the group is gone) is not an error: the rank is on its way out anyway.
  ::kill(-pid_, sig);
}

bool ChildProcess::reap_if_exited() {
  if (!running_) return true;
  // WNOWAIT leaves the child a zombie: its pid (= its group id) cannot be reused until we reap it, so
  // the kill below cannot hit a stranger's group.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno == EINTR) return false;
    // ECHILD: someone else reaped it; all we can say is that it is gone and its status is lost.
    running_ = false;
    wait_status_ = W_EXITCODE(255, 0);
    return true;
  }
  if (info.si_pid == 0) return false;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  running_ = false;
  wait_status_ = status;
  return true;
}

}  // namespace braid::runtime::launcher
