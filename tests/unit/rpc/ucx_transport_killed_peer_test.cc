// The UCX transport with its peer in another process that is killed (SIGKILL) in the middle of large
// transfers, in either direction: the failure is reported promptly and nothing crashes. The peer is this
// test executable itself, running the hidden test case "ucx transport peer process". Compiles to nothing
// without UCX.
#include "base/config.h"

#if BRAID_HAVE_UCX

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ucx_test_harness.h"

extern char** environ;

using namespace braid;
using namespace braid::rpc;
using namespace braid::rpc::ucx_test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kPeerEnv = "BRAID_UCX_TEST_PEER";  // "<read fd>,<write fd>,<send|receive>"

void write_blob(int fd, const std::vector<uint8_t>& bytes) {
  const uint64_t n = bytes.size();
  REQUIRE(::write(fd, &n, sizeof(n)) == static_cast<ssize_t>(sizeof(n)));
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
}

std::vector<uint8_t> read_blob(int fd) {
  uint64_t n = 0;
  REQUIRE(::read(fd, &n, sizeof(n)) == static_cast<ssize_t>(sizeof(n)));
  REQUIRE(n < (1u << 20));
  std::vector<uint8_t> bytes(n);
  size_t at = 0;
  while (at < n) {
    const ssize_t r = ::read(fd, bytes.data() + at, n - at);
    REQUIRE(r > 0);
    at += static_cast<size_t>(r);
  }
  return bytes;
}

// The other process: worker 1, started with this executable and the test name below.
class PeerProcess {
 public:
  explicit PeerProcess(const std::string& mode) {
    int to_peer[2];
    int from_peer[2];
    REQUIRE(::pipe(to_peer) == 0);
    REQUIRE(::pipe(from_peer) == 0);
    const std::string env = std::string(kPeerEnv) + "=" + std::to_string(to_peer[0]) + "," +
                            std::to_string(from_peer[1]) + "," + mode;
    std::vector<std::string> env_strings{env};
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::string name = "ucx transport peer process";
    char* argv[] = {exe.data(), name.data(), nullptr};
    REQUIRE(::posix_spawn(&pid_, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) == 0);
    ::close(to_peer[0]);
    ::close(from_peer[1]);
    to_peer_ = to_peer[1];
    from_peer_ = from_peer[0];
  }
  ~PeerProcess() {
    kill();
    ::close(to_peer_);
    ::close(from_peer_);
  }
  std::vector<uint8_t> address() { return read_blob(from_peer_); }
  void introduce(const std::vector<uint8_t>& ours) { write_blob(to_peer_, ours); }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int to_peer_ = -1;
  int from_peer_ = -1;
};

}  // namespace

TEST_CASE("ucx transport peer process", "[.ucx_peer]") {
  const char* spec = std::getenv(kPeerEnv);
  REQUIRE(spec != nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test that started it
  int in = -1;
  int out = -1;
  char mode[16] = {};
  REQUIRE(std::sscanf(spec, "%d,%d,%15s", &in, &out, mode) == 3);
  Node self(1);
  write_blob(out, self.transport().local_address());
  self.transport().add_peers({PeerInfo{0, "test", read_blob(in)}});
  if (std::strcmp(mode, "send") == 0) {
    const Tensor big = ones({4 << 20});  // 16 MiB: rendezvous
    for (uint64_t i = 0;; ++i) {
      self.send(0, make_message(i, {big}));
      std::this_thread::sleep_for(1ms);
    }
  }
  std::this_thread::sleep_for(60s);  // receives until killed
}

TEST_CASE("ucx transport: a peer process killed while receiving our rendezvous sends is reported", "[rpc][ucx]") {
  Node a(0);
  PeerProcess peer("receive");
  const auto address = peer.address();
  peer.introduce(a.transport().local_address());
  a.transport().add_peers({PeerInfo{1, "peer", address}});
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    const Tensor big = ones({1 << 20});  // 4 MiB
    for (uint64_t i = 0; !stop.load(); ++i) {
      a.send(1, make_message(i, {big}));
      std::this_thread::sleep_for(500us);
    }
  });
  std::this_thread::sleep_for(100ms);
  peer.kill();
  const auto t0 = Clock::now();
  const bool reported = a.wait_failures(1, 3000ms);
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  // The sender goes on for a while: its sends reconnect once, then wait for the backoff (failing at once)
  // instead of connecting to the dead peer per message.
  std::this_thread::sleep_for(300ms);
  stop = true;
  sender.join();
  REQUIRE(reported);
  CHECK(took < 2.0);
  const auto failures = a.failures();
  CHECK(failures[0].first == 1);
  CHECK_THAT(failures[0].second, Catch::Contains("worker 1 (peer)"));
  const bool deferred = std::any_of(failures.begin(), failures.end(), [](const auto& f) {
    return f.second.find("the next connect is tried in") != std::string::npos;
  });
  CHECK(deferred);
}

TEST_CASE("ucx transport: a peer process killed while sending us rendezvous messages is reported", "[rpc][ucx]") {
  Node a(0);
  PeerProcess peer("send");
  const auto address = peer.address();
  a.transport().add_peers({PeerInfo{1, "peer", address}});
  peer.introduce(a.transport().local_address());
  REQUIRE(a.wait_messages(3));  // a 16 MiB message every millisecond or so: more are queued or in flight
  peer.kill();
  const auto t0 = Clock::now();
  // a never sent to the peer: the endpoints it made for the sender notice its death.
  REQUIRE(a.wait_failures(1, 3000ms));
  CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 2.0);
  CHECK(a.failures()[0].first == 1);
  std::this_thread::sleep_for(100ms);  // what was still queued from the peer is dropped, without a crash
  for (const auto& r : a.messages()) CHECK(r.msg.tensors.at(0).numel() == (4 << 20));
}

#endif  // BRAID_HAVE_UCX
