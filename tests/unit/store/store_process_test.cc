// Stores shared across real processes (fork), wire robustness, and rendezvous from URLs and launchers.
#include <catch2/catch.hpp>

#include <netdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "store/file_store.h"
#include "security/job_secret.h"
#include "store/rendezvous.h"
#include "store/tcp_protocol.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"
#include "tests/support/raw_handshake.h"

using namespace braid::store;
namespace security = braid::security;
namespace testing = braid::testing;
using namespace std::chrono_literals;

namespace {

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("braid_proc_" + tag + "_" + std::to_string(::getpid()))).string();
}

// Runs `child` in a forked process; returns its exit status (0 = the child's checks held).
template <class F>
pid_t spawn(F child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = child() ? 0 : 3;
    } catch (...) {
      rc = 2;
    }
    std::_Exit(rc);
  }
  return pid;
}

int join(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// Sets environment variables for a scope and restores them.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto& [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      if (v) ::setenv(k, v, 1);
      else ::unsetenv(k);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Clears every launcher variable so detection starts from a known state.
ScopedEnv clean_launch_env() {
  return ScopedEnv({{"OMPI_COMM_WORLD_RANK", nullptr}, {"OMPI_COMM_WORLD_SIZE", nullptr},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", nullptr}, {"OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
                    {"SLURM_PROCID", nullptr}, {"SLURM_NTASKS", nullptr}, {"SLURM_LOCALID", nullptr},
                    {"SLURM_JOB_NODELIST", nullptr}, {"RANK", nullptr}, {"WORLD_SIZE", nullptr},
                    {"LOCAL_RANK", nullptr}, {"MASTER_ADDR", nullptr}, {"MASTER_PORT", nullptr}});
}

}  // namespace

TEST_CASE("FileStore: processes sharing a file see each other's keys and atomic counters", "[store][process]") {
  const std::string path = temp_path("fs");
  std::filesystem::remove(path);
  constexpr int kProcs = 3;
  std::vector<pid_t> pids;
  for (int r = 0; r < kProcs; ++r) {
    pids.push_back(spawn([&, r] {
      FileStore s(path, kProcs, 10s);
      s.set("rank" + std::to_string(r), std::to_string(r));
      for (int i = 0; i < 20; ++i) s.add("hits", 1);
      s.wait({"rank0", "rank1", "rank2"});
      s.add("done", 1);
      // Everyone waits until all have counted before leaving (the last one out removes the file).
      while (s.get_string("done") != std::to_string(kProcs)) std::this_thread::sleep_for(1ms);
      return s.get_string("hits") == std::to_string(20 * kProcs) && s.get_string("rank2") == "2";
    }));
  }
  for (pid_t p : pids) REQUIRE(join(p) == 0);
  REQUIRE_FALSE(std::filesystem::exists(path));  // cleaned up by the last of world_size stores
}

TEST_CASE("FileStore: two stores on one file in one process both keep working", "[store]") {
  const std::string path = temp_path("fs2");
  {
    FileStore a(path, 2, 5s);
    FileStore b(path, 2, 5s);
    a.set("k", "from a");
    REQUIRE(b.get_string("k") == "from a");
    b.add("n", 2);
    REQUIRE(a.add("n", 1) == 3);
  }
  REQUIRE_FALSE(std::filesystem::exists(path));
}

TEST_CASE("TCPStore: clients in other processes, started before the server, rendezvous", "[store][process]") {
  // Find a free port by binding port 0 once, then hand it to the children before the master exists.
  uint16_t port = 0;
  {
    TcpStoreOptions o;
    o.is_master = true;
    o.world_size = 1;
    TCPStore probe("127.0.0.1", 0, o);
    port = probe.port();
  }
  std::vector<pid_t> pids;
  for (int r = 1; r <= 2; ++r) {
    pids.push_back(spawn([port, r] {
      TcpStoreOptions o;
      o.timeout = 10s;
      TCPStore s("127.0.0.1", port, o);  // retries until the master is up
      s.set("worker" + std::to_string(r), "ready");
      return s.get_string("go") == "now";
    }));
  }
  std::this_thread::sleep_for(100ms);
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 3;
  o.timeout = 10s;
  TCPStore master("127.0.0.1", port, o);  // waits for both workers to connect
  master.wait({"worker1", "worker2"});
  master.set("go", "now");
  for (pid_t p : pids) REQUIRE(join(p) == 0);
}

TEST_CASE("TCPStore: the master times out naming how many workers came", "[store]") {
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 3;
  o.timeout = 300ms;
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", 0, o), Catch::Contains("waiting for 3 workers to connect (1 did)"));
}

TEST_CASE("TCPStore: a malformed frame closes only that connection", "[store]") {
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 1;
  o.timeout = 5s;
  TCPStore store("127.0.0.1", 0, o);
  store.set("k", "v");
  namespace asio = boost::asio;
  asio::io_context io;
  for (const std::vector<uint32_t>& junk : {std::vector<uint32_t>{0xdeadbeef, 4, 0},               // bad magic
                                            std::vector<uint32_t>{wire::kMagic, 0xffffffffu, 0},  // huge body
                                            std::vector<uint32_t>{wire::kMagic, 4, 0x000000ff}}) { // bad command
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address("127.0.0.1"), store.port()});
    // Past the handshake, as a client holding the secret: only then are frames read at all.
    REQUIRE(testing::raw_client_handshake(sock, security::job_secret(), security::Service::kStore));
    asio::write(sock, asio::buffer(junk));
    // The server answers a bad command with an error frame, or closes; either way it must not crash.
    std::array<uint8_t, 64> buf{};
    boost::system::error_code ec;
    sock.read_some(asio::buffer(buf), ec);
  }
  REQUIRE(store.get_string("k") == "v");
  store.set("k2", "still serving");
  REQUIRE(store.get_string("k2") == "still serving");
}

// Resident memory of this process, in bytes (/proc/self/statm's second field is in pages).
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST_CASE("TCPStore: headers that claim 1 GiB bodies cost only the bytes sent", "[store][security]") {
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 1;
  o.timeout = 5s;
  TCPStore store("127.0.0.1", 0, o);
  namespace asio = boost::asio;
  asio::io_context io;
  std::vector<std::unique_ptr<asio::ip::tcp::socket>> liars;
  const size_t before = resident_bytes();
  for (int i = 0; i < 4; ++i) {
    auto sock = std::make_unique<asio::ip::tcp::socket>(io);
    sock->connect({asio::ip::make_address("127.0.0.1"), store.port()});
    REQUIRE(testing::raw_client_handshake(*sock, security::job_secret(), security::Service::kStore));
    const std::vector<uint32_t> header = {wire::kMagic, 1u << 30, 0x01010101};  // then 4 bytes of body, no more
    asio::write(*sock, asio::buffer(header));
    liars.push_back(std::move(sock));
  }
  store.set("k", "v");  // a round trip through the server: it has read what the liars sent
  REQUIRE(store.get_string("k") == "v");
  const size_t grown = resident_bytes() - std::min(before, resident_bytes());
  // Before the body was read in chunks, this grew by 4 GiB (four buffers sized from the headers).
  CHECK(grown < size_t{64} << 20);
}

TEST_CASE("TCPStore: a client without the job secret is refused before anything is read", "[store][security]") {
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 1;
  o.timeout = 5s;
  o.secret = security::JobSecret::from_text("the-store-job-secret", "test");
  TCPStore store("127.0.0.1", 0, o);
  store.set("k", "v");
  namespace asio = boost::asio;
  asio::io_context io;
  SECTION("a wrong secret: a braid client gets a CommError naming the failure") {
    TcpStoreOptions c;
    c.timeout = 2s;
    c.secret = security::JobSecret::from_text("another-job-secret", "test");
    REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", store.port(), c),
                        Catch::Contains("authentication with 127.0.0.1:") && Catch::Contains("failed"));
  }
  SECTION("a wrong secret: a raw client gets no proof") {
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address("127.0.0.1"), store.port()});
    CHECK_FALSE(testing::raw_client_handshake(sock, security::JobSecret::from_text("another-job-secret", "test"),
                                              security::Service::kStore));
  }
  SECTION("no secret: the old requests and a 1 GiB header are dropped unread") {
    for (const std::vector<uint32_t>& frame : {std::vector<uint32_t>{wire::kMagic, 1u << 30, 0, 0, 0, 0, 0, 0,
                                                                     0, 0, 0, 0, 0, 0, 0, 0, 0},
                                               std::vector<uint32_t>{wire::kMagic, 5, 0x7}}) {  // NumKeys
      asio::ip::tcp::socket sock(io);
      sock.connect({asio::ip::make_address("127.0.0.1"), store.port()});
      security::Challenge challenge{};
      asio::read(sock, asio::buffer(challenge));
      boost::system::error_code ec;
      asio::write(sock, asio::buffer(frame), ec);
      CHECK(testing::closed_by_server(sock));
    }
  }
  SECTION("a client that sends nothing does not hold up the others") {
    asio::ip::tcp::socket idle(io);
    idle.connect({asio::ip::make_address("127.0.0.1"), store.port()});
    TcpStoreOptions c;
    c.timeout = 2s;
    c.secret = o.secret;
    TCPStore client("127.0.0.1", store.port(), c);
    CHECK(client.get_string("k") == "v");
  }
  REQUIRE(store.get_string("k") == "v");
}

TEST_CASE("TCPStore server: a client that never authenticates is closed at the handshake timeout", "[store][security]") {
  TcpStoreServer server("127.0.0.1", 0, security::JobSecret::from_text("the-store-job-secret", "test"), Millis(200));
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), server.port()});
  security::Challenge challenge{};
  asio::read(sock, asio::buffer(challenge));
  CHECK(testing::closed_by_server(sock));  // blocks until the server's timer closes it
}

TEST_CASE("TCPStore: the server listens on loopback for a host name that only resolves there", "[store][security]") {
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 1;
  o.timeout = 5s;
  TCPStore store("localhost", 0, o);
  namespace asio = boost::asio;
  asio::io_context io;
  // Reachable on loopback; the test for "never 0.0.0.0" reads the process's own sockets
  // (tests/e2e/listen_sockets_test.py).
  asio::ip::tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), store.port()});
  REQUIRE(testing::raw_client_handshake(sock, security::job_secret(), security::Service::kStore));
}

TEST_CASE("TCPStore: connecting to nothing times out with the address and the reason", "[store]") {
  TcpStoreOptions o;
  o.timeout = 200ms;
  REQUIRE_THROWS_WITH(TCPStore("127.0.0.1", 1, o), Catch::Contains("could not connect to 127.0.0.1:1"));
}

TEST_CASE("TCPStore: a master given a host name listens, and clients reach it by that name", "[store]") {
  // Slurm's first node and MASTER_ADDR are often host names, not addresses.
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof(name) - 1) == 0);
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, nullptr, &found) != 0) {
    WARN("this machine's host name '" << name << "' does not resolve; nothing to test");
    return;
  }
  ::freeaddrinfo(found);
  TcpStoreOptions o;
  o.is_master = true;
  o.world_size = 1;
  o.timeout = Millis(5000);
  TCPStore master(name, 0, o);
  TcpStoreOptions client_options;
  client_options.timeout = Millis(5000);
  TCPStore client(name, master.port(), client_options);
  client.set("k", {7});
  REQUIRE(master.get("k", Millis(1000)) == Bytes{7});
  REQUIRE_THROWS_WITH(TCPStore("no-such-host.invalid", 0, o), Catch::Contains("cannot resolve the host name"));
}

TEST_CASE("nodelist: first host of Slurm node lists", "[store][rendezvous]") {
  REQUIRE(first_host_of_nodelist("node[01-04,07],gpu5") == "node01");
  REQUIRE(first_host_of_nodelist("host1,host2") == "host1");
  REQUIRE(first_host_of_nodelist("single") == "single");
  REQUIRE(first_host_of_nodelist("rack[3,5]-n[2-4]") == "rack3-n[2-4]");
  REQUIRE_THROWS_WITH(first_host_of_nodelist("bad[1-2"), Catch::Contains("unbalanced"));
}

TEST_CASE("detect_launch: Open MPI, Slurm and env variables", "[store][rendezvous]") {
  auto clean = clean_launch_env();
  REQUIRE(detect_launch().launcher == "none");
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
    auto info = detect_launch();
    REQUIRE(info.launcher == "mpi");
    REQUIRE(info.rank == 2);
    REQUIRE(info.world_size == 4);
    REQUIRE(info.local_rank == 0);
  }
  {
    ScopedEnv env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"},
                   {"SLURM_JOB_NODELIST", "cn[10-11]"}});
    auto info = detect_launch();
    REQUIRE(info.launcher == "slurm");
    REQUIRE(info.master_addr == "cn10");
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "0"}});
    REQUIRE_THROWS_WITH(detect_launch(), Catch::Contains("OMPI_COMM_WORLD_SIZE"));
  }
  {
    ScopedEnv env({{"RANK", "x1"}, {"WORLD_SIZE", "2"}});
    REQUIRE_THROWS_WITH(detect_launch(), Catch::Contains("RANK") && Catch::Contains("x1"));
  }
  {
    ScopedEnv env({{"RANK", "5"}, {"WORLD_SIZE", "2"}});
    REQUIRE_THROWS_WITH(detect_launch(), Catch::Contains("out of range"));
  }
}

TEST_CASE("rendezvous: env://, tcp:// and file:// give a working store", "[store][rendezvous]") {
  auto clean = clean_launch_env();
  SECTION("env:// names the missing variable") {
    ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    REQUIRE_THROWS_WITH(rendezvous("env://"), Catch::Contains("MASTER_ADDR"));
    ScopedEnv env2({{"MASTER_ADDR", "127.0.0.1"}});
    REQUIRE_THROWS_WITH(rendezvous("env://"), Catch::Contains("MASTER_PORT"));
  }
  SECTION("env:// with every variable set") {
    uint16_t port = 0;
    {
      TcpStoreOptions o;
      o.is_master = true;
      o.world_size = 1;
      port = TCPStore("127.0.0.1", 0, o).port();
    }
    const std::string p = std::to_string(port);
    ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", p.c_str()}});
    auto r = rendezvous("env://", -1, -1, 5s);
    REQUIRE(r.rank == 0);
    REQUIRE(r.world_size == 1);
    r.store->set("x", "1");
    REQUIRE(r.store->get_string("x") == "1");
  }
  SECTION("file:// with query parameters") {
    const std::string path = temp_path("rdv");
    auto r = rendezvous("file://" + path + "?rank=0&world_size=1", -1, -1, 5s);
    REQUIRE(r.world_size == 1);
    r.store->set("y", "2");
    REQUIRE(r.store->get_string("y") == "2");
  }
  SECTION("tcp:// needs a rank and world size") {
    REQUIRE_THROWS_WITH(rendezvous("tcp://127.0.0.1:1"), Catch::Contains("world size is unknown"));
  }
  SECTION("unknown scheme and malformed URLs") {
    REQUIRE_THROWS_WITH(rendezvous("redis://x", 0, 1), Catch::Contains("unknown scheme 'redis'"));
    REQUIRE_THROWS_WITH(rendezvous("nonsense", 0, 1), Catch::Contains("expected a URL"));
    REQUIRE_THROWS_WITH(rendezvous("file:///tmp/x", 3, 2), Catch::Contains("rank 3 is out of range"));
  }
}

TEST_CASE("store timeout: a default-store get on a missing key fails with 'timeout' in under 3 s", "[store]") {
  // torch's TimeoutTest.test_default_store_timeout_gloo, for both URL forms.
  auto clean = clean_launch_env();
  const std::string path = temp_path("tmo");
  for (const std::string& url : {"file://" + path, std::string("tcp://127.0.0.1:0")}) {
    auto r = rendezvous(url, 0, 1, 1000ms);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE_THROWS_WITH(r.store->get("nonexistent key"), Catch::Contains("timed out"));
    REQUIRE(std::chrono::steady_clock::now() - start < 3s);
  }
}
