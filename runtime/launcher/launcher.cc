#include "runtime/launcher/launcher.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "base/check.h"
#include "base/env.h"
#include "runtime/launcher/child_process.h"
#include "runtime/launcher/exit_status.h"
#include "runtime/launcher/line_prefixer.h"
#include "runtime/launcher/rank_env.h"
#include "runtime/launcher/signal_fd.h"
#include "security/job_secret.h"

extern char** environ;

namespace braid::runtime::launcher {
namespace {

constexpr int kMaxRanks = 4096;
// After SIGKILL a rank ends at once unless it is stuck in the kernel; this long, then the launcher gives up.
constexpr Millis kReapAfterKill{5'000};
// Once every rank has exited, output still in the pipes (or held by something that escaped a rank's
// process group) is read for at most this long.
constexpr Millis kDrainTimeout{1'000};
// The loop wakes up at least this often even when nothing happens, and checks the ranks again.
constexpr int kPollIntervalMs = 1'000;

// The operator's secret when one is set (BRAID_JOB_SECRET, BRAID_JOB_SECRET_FILE), else a fresh one for
// this job alone: a rank of another job cannot talk to this one's, even as the same user.
security::JobSecret launch_secret() {
  if (env::get("BRAID_JOB_SECRET") || env::get("BRAID_JOB_SECRET_FILE")) return security::job_secret();
  return security::JobSecret::generate();
}

// Writes everything, retrying short writes. A reader that went away (EPIPE) loses the output, not the job.
void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void say(const std::string& message) { write_all(STDERR_FILENO, "braid launch: " + message + "\n"); }

std::string ranks_word(int n) { return n == 1 ? "rank" : "ranks"; }

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

// The launcher's writes to a closed terminal or pipe must fail with EPIPE, not kill it mid-job.
class IgnoreSigpipe {
 public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &previous_);
  }
  ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &previous_, nullptr); }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

 private:
  struct sigaction previous_ {};
};

// The file through which the launcher tells its ranks why it stops them (BRAID_LAUNCH_NOTICE): when a rank
// fails, "rank R killed by SIGKILL" is written there before the others get SIGTERM, so that each of them
// can name the failed rank and exit rather than try to checkpoint with a dead peer. Private to the user
// (mkstemp, 0600), removed at the end.
class NoticeFile {
 public:
  NoticeFile() {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string templ = std::string(tmpdir != nullptr && *tmpdir != 0 ? tmpdir : "/tmp") + "/braid-launch-XXXXXX";
    fd_ = UniqueFd(::mkostemp(templ.data(), O_CLOEXEC));
    if (fd_.valid()) path_ = templ;  // no notice is no failure: the ranks then stop as on any SIGTERM
  }
  ~NoticeFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  NoticeFile(const NoticeFile&) = delete;
  NoticeFile& operator=(const NoticeFile&) = delete;

  const std::string& path() const { return path_; }
  void write(const std::string& text) {
    if (fd_.valid()) write_all(fd_.get(), text + "\n");
  }

 private:
  UniqueFd fd_;
  std::string path_;
};

// One run of the launcher: the ranks, their output and the phase of the job. Single-threaded: run() is
// a poll() loop over the signalfd and every rank's pipes.
class Launch {
 public:
  Launch(const LaunchOptions& options, std::string executable, int port, int restart, SignalFd& signals)
      : options_(options), executable_(std::move(executable)), port_(port), restart_(restart), signals_(signals) {}

  int run();
  // Why this run failed ("rank 2 (worker) killed by SIGKILL") when a restart may mend it: a rank failed
  // while the job ran, the launcher was not told to stop, and the failure is no bad input (exit code 2).
  std::optional<std::string> restartable_failure() const;

 private:
  // Running: no failure and no stop request yet. Stopping: the ranks got SIGTERM (or the signal the
  // launcher got); SIGKILL at deadline_. Killing: SIGKILL sent; the launcher gives up at deadline_.
  enum class Phase { kRunning, kStopping, kKilling };

  struct Rank {
    ChildProcess process;
    std::array<LinePrefixer, 2> prefixers;  // stdout, stderr
  };

  void spawn_all();
  void reap_exited();
  void on_signal(int sig);
  void on_readable(Rank& rank, int stream);
  void stop(int sig, Millis grace);
  void kill_all();
  void on_deadline();
  void close_output(Rank& rank, int stream);
  int running_count() const;
  std::string running_list() const;
  std::string describe(size_t rank) const;

  const LaunchOptions& options_;
  const std::string executable_;
  const int port_;
  const int restart_;
  SignalFd& signals_;
  const security::JobSecret secret_ = launch_secret();
  std::vector<Rank> ranks_;
  Phase phase_ = Phase::kRunning;
  Deadline deadline_ = Deadline::never();
  int stop_signal_ = 0;  // what the ranks got when the job began to stop, and how long they were given
  Millis stop_grace_{0};
  std::optional<int> first_failure_;  // the wait status of the first rank that did not exit 0
  std::string first_failure_text_;    // "rank 2 (worker) killed by SIGKILL"
  bool failed_while_running_ = false;  // the first failure came before any stop
  bool told_to_stop_ = false;          // SIGINT, SIGTERM or SIGHUP reached the launcher
  bool gave_up_ = false;
  NoticeFile notice_;
};

void Launch::spawn_all() {
  const std::vector<std::string> parent_env = current_environment();
  ranks_.reserve(static_cast<size_t>(options_.nprocs));
  for (int r = 0; r < options_.nprocs; ++r) {
    SpawnSpec spec;
    spec.path = executable_;
    spec.argv = options_.command;
    spec.env = rank_environment(parent_env, {r, options_.nprocs, options_.master_addr, port_, secret_.text(), restart_});
    std::erase_if(spec.env, [](const std::string& e) { return e.rfind("BRAID_LAUNCH_NOTICE=", 0) == 0; });
    if (!notice_.path().empty()) spec.env.push_back("BRAID_LAUNCH_NOTICE=" + notice_.path());
    spec.capture_output = options_.prefix_output;
    const std::string prefix = fmt::format("[rank {}] ", r);
    // On a throw, the ranks already in ranks_ are killed and reaped by their destructors.
    ranks_.push_back(Rank{ChildProcess::spawn(spec), {LinePrefixer(prefix), LinePrefixer(prefix)}});
  }
}

int Launch::running_count() const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.process.running(); }));
}

std::string Launch::running_list() const {
  std::string out;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].process.running()) out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  return out;
}

std::string Launch::describe(size_t rank) const {
  return options_.describe_rank ? options_.describe_rank(static_cast<int>(rank)) : fmt::format("rank {}", rank);
}

std::optional<std::string> Launch::restartable_failure() const {
  if (!first_failure_ || !failed_while_running_ || told_to_stop_) return std::nullopt;
  if (exit_code_of(*first_failure_) == kBadInputExitCode) return std::nullopt;
  return first_failure_text_;
}

void Launch::stop(int sig, Millis grace) {
  for (const Rank& r : ranks_) {
    r.process.signal_group(sig);
    // A stopped rank (SIGSTOP, a debugger's SIGTSTP) cannot act on the signal until it runs again; as
    // mpirun and Slurm do, continue it, or it would wait for SIGKILL.
    r.process.signal_group(SIGCONT);
  }
  phase_ = Phase::kStopping;
  deadline_ = Deadline::after(grace);
  stop_signal_ = sig;
  stop_grace_ = grace;
}

void Launch::kill_all() {
  for (const Rank& r : ranks_) r.process.signal_group(SIGKILL);
  phase_ = Phase::kKilling;
  deadline_ = Deadline::after(kReapAfterKill);
}

void Launch::reap_exited() {
  // Reap every rank that has ended before reporting, so that "the other N ranks" counts only ranks that
  // are still running, and ranks that failed together are all named.
  std::vector<size_t> failed;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ChildProcess& p = ranks_[r].process;
    if (p.running() && p.reap_if_exited() && !succeeded(p.wait_status())) failed.push_back(r);
  }
  for (const size_t r : failed) {
    const int status = ranks_[r].process.wait_status();
    const bool first = !first_failure_;
    if (first) {
      first_failure_ = status;
      first_failure_text_ = fmt::format("{} {}", describe(r), describe_exit(status));
      failed_while_running_ = phase_ == Phase::kRunning;
    }
    // Ranks that fail while the job is already stopping were most likely stopped by the launcher itself.
    if (!first && phase_ != Phase::kRunning) continue;
    const int others = running_count();
    if (first && phase_ == Phase::kRunning && others > 0) {
      notice_.write(fmt::format("rank {} {}", r, describe_exit(status)));
      say(fmt::format("{} {}; stopping the other {} {}", describe(r), describe_exit(status), others, ranks_word(others)));
    } else {
      say(fmt::format("{} {}", describe(r), describe_exit(status)));
    }
  }
  if (first_failure_ && phase_ == Phase::kRunning && running_count() > 0) stop(SIGTERM, options_.kill_timeout);
}

void Launch::on_signal(int sig) {
  if (sig == SIGCHLD) return;  // reap_exited() runs after every wake-up
  const int running = running_count();
  if (sig == SIGUSR1 || sig == SIGUSR2) {
    say(fmt::format("got {}; forwarding it to {} {}", signal_name(sig), running, ranks_word(running)));
    for (const Rank& r : ranks_) r.process.signal_group(sig);
    return;
  }
  // SIGINT, SIGTERM, SIGHUP: the job is to end. A second one does not wait any longer.
  told_to_stop_ = true;
  if (phase_ == Phase::kRunning) {
    say(fmt::format("got {}; forwarding it to {} {} (SIGKILL after {} s)", signal_name(sig), running,
                    ranks_word(running), options_.term_timeout.count() / 1000.0));
    stop(sig, options_.term_timeout);
  } else if (phase_ == Phase::kStopping) {
    say(fmt::format("got {} while stopping; killing {} {} now", signal_name(sig), running, ranks_word(running)));
    kill_all();
  }
}

void Launch::on_deadline() {
  const int running = running_count();
  if (phase_ == Phase::kStopping) {
    say(fmt::format("{} {} still running {} s after {}; sending SIGKILL", ranks_word(running), running_list(),
                    stop_grace_.count() / 1000.0, signal_name(stop_signal_)));
    kill_all();
  } else if (phase_ == Phase::kKilling) {
    say(fmt::format("{} {} not gone {} s after SIGKILL; giving up on them", ranks_word(running), running_list(),
                    kReapAfterKill.count() / 1000));
    for (Rank& r : ranks_) r.process.abandon();
    gave_up_ = true;
  }
}

void Launch::close_output(Rank& rank, int stream) {
  write_all(stream, rank.prefixers[static_cast<size_t>(stream - 1)].finish());
  rank.process.output(stream).reset();
}

void Launch::on_readable(Rank& rank, int stream) {
  std::array<char, 65536> buffer;
  const ssize_t n = ::read(rank.process.output(stream).get(), buffer.data(), buffer.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_output(rank, stream);  // end of stream, or an error that ends it just the same
    return;
  }
  write_all(stream, rank.prefixers[static_cast<size_t>(stream - 1)].feed({buffer.data(), static_cast<size_t>(n)}));
}

int Launch::run() {
  spawn_all();

  std::optional<Deadline> drain;
  for (;;) {
    reap_exited();
    if (running_count() == 0 && !drain) drain = Deadline::after(kDrainTimeout);
    if (running_count() > 0 && deadline_.expired()) on_deadline();
    if (gave_up_) break;

    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<std::pair<Rank*, int>> sources;  // fds[i + 1] belongs to sources[i]
    for (Rank& r : ranks_) {
      for (int stream : {1, 2}) {
        if (!r.process.output(stream).valid()) continue;
        fds.push_back({r.process.output(stream).get(), POLLIN, 0});
        sources.emplace_back(&r, stream);
      }
    }
    if (drain && (sources.empty() || drain->expired())) break;

    Millis wait{kPollIntervalMs};
    if (!deadline_.is_never()) wait = std::min(wait, deadline_.remaining());
    if (drain) wait = std::min(wait, drain->remaining());
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) BRAID_THROW(Error, "braid launch: poll failed: {}", std::strerror(errno));
    if (ready <= 0) continue;
    if (fds[0].revents & POLLIN) {
      while (auto sig = signals_.next()) on_signal(*sig);
    }
    for (size_t i = 0; i < sources.size(); ++i) {
      if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) on_readable(*sources[i].first, sources[i].second);
    }
  }
  for (Rank& r : ranks_) {
    for (int stream : {1, 2}) {
      if (r.process.output(stream).valid()) close_output(r, stream);
    }
  }
  if (first_failure_) return exit_code_of(*first_failure_);
  return gave_up_ ? 1 : 0;
}

// Sleeps `backoff` unless the launcher is told to stop meanwhile (SIGINT, SIGTERM, SIGHUP): then false.
bool wait_before_restart(SignalFd& signals, Millis backoff) {
  const Deadline deadline = Deadline::after(backoff);
  for (;;) {
    pollfd fd{signals.fd(), POLLIN, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::max<int64_t>(deadline.remaining().count(), 0)));
    if (ready < 0 && errno != EINTR) BRAID_THROW(Error, "braid launch: poll failed: {}", std::strerror(errno));
    while (auto sig = signals.next()) {
      if (*sig == SIGINT || *sig == SIGTERM || *sig == SIGHUP) {
        say(fmt::format("got {} before the restart; not restarting", signal_name(*sig)));
        return false;
      }
    }
    if (deadline.expired()) return true;
  }
}

}  // namespace

std::string resolve_executable(const std::string& name, const std::string& path_env) {
  BRAID_CHECK_ARG(!name.empty(), "braid launch: the command is empty");
  auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    BRAID_CHECK_ARG(executable(name), "braid launch: '{}' is not an executable file", name);
    return name;
  }
  size_t start = 0;
  for (;;) {
    const size_t end = std::min(path_env.find(':', start), path_env.size());
    const std::string dir = path_env.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(candidate)) return candidate;
    if (end == path_env.size()) break;
    start = end + 1;
  }
  BRAID_THROW(InvalidArgument, "braid launch: command '{}' not found in PATH ({})", name, path_env);
}

int pick_free_port(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), "0", &hints, &found);
  BRAID_CHECK_ARG(rc == 0, "braid launch: --master-addr '{}' does not resolve: {}", addr, ::gai_strerror(rc));
  std::string last_error = "no address";
  int port = -1;
  for (addrinfo* a = found; a != nullptr && port < 0; a = a->ai_next) {
    UniqueFd sock(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (!sock.valid() || ::bind(sock.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  ::freeaddrinfo(found);
  BRAID_CHECK_ARG(port > 0, "braid launch: no free port on --master-addr '{}': {}", addr, last_error);
  return port;
}

std::string current_executable() {
  std::array<char, PATH_MAX> buffer;
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0) BRAID_THROW(Error, "braid launch: cannot read /proc/self/exe: {}", std::strerror(errno));
  return std::string(buffer.data(), static_cast<size_t>(n));
}

int launch(const LaunchOptions& options) {
  BRAID_CHECK_ARG(options.nprocs >= 1 && options.nprocs <= kMaxRanks, "braid launch: -n {} is out of range (1..{})",
                  options.nprocs, kMaxRanks);
  BRAID_CHECK_ARG(!options.command.empty(), "braid launch: no command given; put it after '--', e.g. "
                  "braid launch -n 2 -- braid info");
  BRAID_CHECK_ARG(options.master_port >= 0 && options.master_port < 65536,
                  "braid launch: --master-port {} is out of range (0..65535)", options.master_port);
  BRAID_CHECK_ARG(options.kill_timeout.count() > 0, "braid launch: --kill-timeout must be positive");
  BRAID_CHECK_ARG(options.term_timeout.count() > 0, "braid launch: --term-timeout must be positive");
  BRAID_CHECK_ARG(!options.master_addr.empty(), "braid launch: --master-addr is empty");
  const char* path = std::getenv("PATH");
  const std::string executable = options.command[0] == "braid" && !options.braid_executable.empty()
                                     ? options.braid_executable
                                     : resolve_executable(options.command[0], path ? path : "/usr/bin:/bin");
  BRAID_CHECK_ARG(options.max_restarts >= 0, "braid launch: --max-restarts must be >= 0, got {}", options.max_restarts);
  BRAID_CHECK_ARG(options.restart_backoff.count() >= 0, "braid launch: the restart backoff must be >= 0");
  // One signalfd for every run of the job: a signal between two runs is seen, not lost or fatal.
  SignalFd signals({SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD});
  IgnoreSigpipe ignore_sigpipe;
  for (int restart = 0;; ++restart) {
    // A fresh port each run: the last run's store port may still be in TIME_WAIT, or taken since.
    const int port = options.master_port > 0 ? options.master_port : pick_free_port(options.master_addr);
    Launch run(options, executable, port, restart, signals);
    const int code = run.run();
    const std::optional<std::string> failure = run.restartable_failure();
    if (!failure && options.max_restarts > 0 && code == kBadInputExitCode) {
      say("not restarting: exit code 2 is a bad job file or command line, which a restart cannot mend");
    }
    if (!failure || options.max_restarts == 0) return code;
    if (restart >= options.max_restarts) {
      say(fmt::format("{}; no restart left ({} of {} done)", *failure, restart, options.max_restarts));
      return code;
    }
    say(fmt::format("restart {} of {} in {} s: {}", restart + 1, options.max_restarts,
                    options.restart_backoff.count() / 1000.0, *failure));
    if (!wait_before_restart(signals, options.restart_backoff)) return code;
  }
}

}  // namespace braid::runtime::launcher
