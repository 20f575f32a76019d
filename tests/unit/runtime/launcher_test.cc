// `braid launch`'s pieces (runtime/launcher/): the line prefixer, the words and exit codes for a rank's
// end, each rank's environment, command lookup and port choice, and launch() itself on tiny shell ranks
// (their output not captured, so that nothing lands in the test log). tests/cli/launch_test.py runs the
// `braid launch` command end to end: prefixed output, signals, failures.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "base/error.h"
#include "runtime/launcher/exit_status.h"
#include "runtime/launcher/launcher.h"
#include "runtime/launcher/line_prefixer.h"
#include "runtime/launcher/rank_env.h"
#include "runtime/launcher/unique_fd.h"

using namespace braid;
using namespace braid::runtime::launcher;

namespace {

// A file in /tmp with the given mode and contents, removed at the end of the test.
class TempFile {
 public:
  TempFile(mode_t mode, const std::string& contents) {
    UniqueFd fd(::mkstemp(path_.data()));
    REQUIRE(fd.valid());
    REQUIRE(::write(fd.get(), contents.data(), contents.size()) == static_cast<ssize_t>(contents.size()));
    REQUIRE(::fchmod(fd.get(), mode) == 0);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_ = "/tmp/braid_launcher_test.XXXXXX";
};

}  // namespace

TEST_CASE("LinePrefixer releases whole lines only, each with the prefix", "[launcher]") {
  LinePrefixer p("[rank 3] ");
  CHECK(p.feed("hel") == "");
  CHECK(p.pending_bytes() == 3);
  CHECK(p.feed("lo\nwor") == "[rank 3] hello\n");
  CHECK(p.feed("ld\n\nthird\nfou") == "[rank 3] world\n[rank 3] \n[rank 3] third\n");
  CHECK(p.feed("") == "");
  CHECK(p.finish() == "[rank 3] fou\n");
  CHECK(p.finish() == "");
  CHECK(p.pending_bytes() == 0);
}

TEST_CASE("LinePrefixer keeps carriage returns and cuts a line that outgrows its bound", "[launcher]") {
  LinePrefixer p("> ", 4);
  CHECK(p.feed("ab\rc\n") == "> ab\rc\n");
  CHECK(p.feed("abc") == "");
  CHECK(p.feed("defghij") == "> abcd\n> efgh\n");
  CHECK(p.pending_bytes() == 2);
  CHECK(p.feed("\n") == "> ij\n");
  CHECK(p.finish() == "");
  CHECK_THROWS_AS(LinePrefixer("x", 0), InvalidArgument);
}

TEST_CASE("exit codes and descriptions follow the shell's conventions", "[launcher]") {
  const int exited3 = W_EXITCODE(3, 0);
  CHECK(exit_code_of(exited3) == 3);
  CHECK_FALSE(succeeded(exited3));
  CHECK(describe_exit(exited3) == "exited with code 3");
  CHECK(succeeded(W_EXITCODE(0, 0)));
  CHECK(exit_code_of(W_EXITCODE(0, 0)) == 0);

  const int killed = SIGKILL;  // a wait status for "terminated by signal 9", no core
  CHECK(exit_code_of(killed) == 137);
  CHECK_FALSE(succeeded(killed));
  CHECK(describe_exit(killed) == "killed by SIGKILL");
  CHECK(describe_exit(SIGSEGV | 0x80) == "killed by SIGSEGV (core dumped)");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(signal_name(1000) == "signal 1000");
}

TEST_CASE("a rank's environment: the launcher's, without outer launchers' ranks, plus env:// variables",
          "[launcher]") {
  const std::vector<std::string> parent = {"PATH=/bin",        "SLURM_PROCID=0",  "OMPI_COMM_WORLD_RANK=0",
                                           "RANK=7",           "RANKING=kept",    "MASTER_PORT=1",
                                           "SLURM_JOB_ID=42",  "EMPTY=",          "BRAID_JOB_SECRET=outer-secret-text"};
  const auto env = rank_environment(parent, {2, 4, "10.0.0.1", 29500, "the-job-secret-text", 3});
  const std::vector<std::string> expected = {"PATH=/bin",   "RANKING=kept",         "SLURM_JOB_ID=42",
                                             "EMPTY=",      "RANK=2",               "WORLD_SIZE=4",
                                             "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1",
                                             "MASTER_PORT=29500", "BRAID_JOB_SECRET=the-job-secret-text",
                                             "BRAID_RESTART_COUNT=3"};
  CHECK(env == expected);
  for (const std::string& name : kOuterLauncherVariables) {
    CHECK(std::none_of(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; }));
  }
  CHECK_THROWS_WITH(rank_environment({}, {4, 4, "h", 1, "s"}), Catch::Contains("rank 4 is outside a job of 4 ranks"));
  CHECK_THROWS_WITH(rank_environment({}, {0, 1, "h", 0, "s"}), Catch::Contains("master port 0"));
  CHECK_THROWS_AS(rank_environment({}, {0, 1, "", 1, "s"}), InvalidArgument);
  CHECK_THROWS_WITH(rank_environment({}, {0, 1, "h", 1, ""}), Catch::Contains("no job secret"));
}

TEST_CASE("resolve_executable searches PATH and names what it could not find", "[launcher]") {
  CHECK(resolve_executable("sh", "/nonexistent-dir:/bin:/usr/bin") == "/bin/sh");
  CHECK(resolve_executable("/bin/sh", "") == "/bin/sh");
  CHECK_THROWS_WITH(resolve_executable("no-such-command-xyz", "/bin:/usr/bin"),
                    Catch::Contains("command 'no-such-command-xyz' not found in PATH (/bin:/usr/bin)"));
  const TempFile data(0644, "not a program\n");
  CHECK_THROWS_WITH(resolve_executable(data.path(), "/bin"),
                    Catch::Contains("'" + data.path() + "' is not an executable file"));
  CHECK_THROWS_AS(resolve_executable("/bin", "/bin"), InvalidArgument);  // a directory
}

TEST_CASE("pick_free_port returns a port that can be bound", "[launcher]") {
  const int port = pick_free_port("127.0.0.1");
  REQUIRE(port > 0);
  REQUIRE(port < 65536);
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  CHECK_THROWS_WITH(pick_free_port("no-such-host.invalid"), Catch::Contains("--master-addr 'no-such-host.invalid'"));
}

namespace {

LaunchOptions shell_ranks(int n, const std::string& script) {
  LaunchOptions o;
  o.nprocs = n;
  o.prefix_output = false;
  o.kill_timeout = Millis(2'000);
  o.command = {"sh", "-c", script};
  return o;
}

}  // namespace

TEST_CASE("launch returns 0 when every rank exits 0 and sees its own RANK", "[launcher]") {
  CHECK(launch(shell_ranks(3, "[ \"$WORLD_SIZE\" = 3 ] && [ \"$RANK\" = \"$LOCAL_RANK\" ] && [ -n \"$MASTER_PORT\" ]")) ==
        0);
  // Each rank fails unless RANK is its own: rank r exits r, so the first failure's code is one of 1..3.
  const int code = launch(shell_ranks(4, "exit $RANK"));
  CHECK(code >= 1);
  CHECK(code <= 3);
}

TEST_CASE("launch stops the other ranks when one fails, and exits with its code", "[launcher]") {
  const auto start = std::chrono::steady_clock::now();
  CHECK(launch(shell_ranks(3, "if [ $RANK = 1 ]; then exit 3; fi; sleep 30")) == 3);
  // A rank that ignores SIGTERM (once its shell has set the trap) is killed after kill_timeout (2 s); rank 0,
  // killed by a signal, gives 128 + 9.
  CHECK(launch(shell_ranks(2, "trap '' TERM; if [ $RANK = 0 ]; then sleep 0.5; kill -9 $$; fi; sleep 30")) == 137);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("launch restarts a failed job up to max_restarts times, with BRAID_RESTART_COUNT counting", "[launcher]") {
  // Rank 1 fails until the job's second restart; every rank sees the same count.
  LaunchOptions o = shell_ranks(2, "echo $BRAID_RESTART_COUNT >> \"$OUT.$RANK\"; "
                                   "if [ $RANK = 1 ] && [ $BRAID_RESTART_COUNT -lt 2 ]; then exit 3; fi; sleep 0.2");
  o.restart_backoff = Millis(0);
  const TempFile out(0644, "");
  ::setenv("OUT", out.path().c_str(), 1);
  auto counts = [&](int rank) {
    std::ifstream in(out.path() + "." + std::to_string(rank));
    std::string all, line;
    while (std::getline(in, line)) all += line + " ";
    ::unlink((out.path() + "." + std::to_string(rank)).c_str());
    return all;
  };
  o.max_restarts = 2;
  CHECK(launch(o) == 0);
  CHECK(counts(0) == "0 1 2 ");
  CHECK(counts(1) == "0 1 2 ");
  o.max_restarts = 1;  // one restart is not enough: the second failure's code
  CHECK(launch(o) == 3);
  CHECK(counts(0) == "0 1 ");
  CHECK(counts(1) == "0 1 ");
  // Exit code 2 (a bad job file or command line) is not restarted.
  o = shell_ranks(1, "echo $BRAID_RESTART_COUNT >> \"$OUT.$RANK\"; exit 2");
  o.max_restarts = 3;
  CHECK(launch(o) == 2);
  CHECK(counts(0) == "0 ");
  ::unsetenv("OUT");
}

TEST_CASE("launch rejects bad options before starting anything", "[launcher]") {
  LaunchOptions o = shell_ranks(0, "true");
  CHECK_THROWS_WITH(launch(o), Catch::Contains("-n 0 is out of range"));
  o = shell_ranks(1, "true");
  o.command.clear();
  CHECK_THROWS_WITH(launch(o), Catch::Contains("no command given"));
  o = shell_ranks(1, "true");
  o.command[0] = "no-such-command-xyz";
  CHECK_THROWS_WITH(launch(o), Catch::Contains("'no-such-command-xyz' not found in PATH"));
  const TempFile data(0644, "not a program\n");
  o = shell_ranks(1, "true");
  o.command[0] = data.path();
  CHECK_THROWS_AS(launch(o), InvalidArgument);
}

TEST_CASE("launch reports a program that cannot be executed, and leaves nothing running", "[launcher]") {
  const TempFile garbage(0755, std::string("\x7f" "ELF garbage", 12));
  LaunchOptions o = shell_ranks(2, "");
  o.command = {garbage.path()};
  CHECK_THROWS_WITH(launch(o), Catch::Contains("cannot execute '" + garbage.path() + "': Exec format error"));
  int status = 0;
  CHECK(::waitpid(-1, &status, WNOHANG) == -1);  // ECHILD: the failed rank was reaped
}
