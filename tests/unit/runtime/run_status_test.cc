// The driver's status endpoint (status_server.h) on its own: its address file, concurrent `braid status`
// clients, and a stop while clients are still connecting. The server answers from its own thread and its
// snapshot reads state the job's threads write, so this test is also what the TSan build runs it under.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/error.h"
#include "runtime/run/status_server.h"
#include "security/job_secret.h"
#include "tests/support/raw_handshake.h"
#include "tests/support/temp_dir.h"

namespace braid::runtime {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST_CASE("run: the status server answers concurrent clients and stops while they connect", "[runtime][run]") {
  TempDir dir;
  const std::string status_file = (fs::path(dir.path()) / "sub" / ".braid-status-t").string();
  std::atomic<int64_t> step{0};
  std::atomic<int> answered{0};
  auto server = std::make_unique<StatusServer>(
      [&](const std::string& request) {
        ++answered;
        return nlohmann::json{{"job", "t"}, {"step", step.load()}, {"request", request}};
      },
      status_file);
  const std::string address = server->address();
  const StatusEndpoint endpoint = read_status_address(status_file);
  CHECK(endpoint.address == address);
  REQUIRE(endpoint.secret);
  CHECK(*endpoint.secret == security::job_secret());
  // Only the job's user may read the secret.
  CHECK((fs::status(status_file).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK(address.rfind("127.0.0.1:", 0) == 0);  // loopback by default

  // Several clients at once, while another thread moves the step on.
  std::atomic<bool> stepping{true};
  std::thread stepper([&] {
    while (stepping) {
      ++step;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::atomic<int> ok{0};
  {
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        for (int i = 0; i < 10; ++i) {
          const nlohmann::json s = query_status(address, endpoint.secret, std::chrono::seconds(10));
          if (s.value("job", "") == "t" && s.value("step", int64_t{-1}) >= 0) ++ok;
        }
      });
    }
    for (auto& t : clients) t.join();
  }
  CHECK(ok == 40);
  CHECK(answered >= 40);
  // The request line reaches the snapshot (`braid status --trace` sends "trace").
  CHECK(query_status(address, endpoint.secret, std::chrono::seconds(10)).value("request", "") == "status");
  CHECK(query_status(address, endpoint.secret, std::chrono::seconds(10), "trace").value("request", "") == "trace");

  // A client that keeps asking while the server goes away: each query either answers or fails cleanly.
  std::atomic<bool> asking{true};
  std::thread late([&] {
    while (asking) {
      try {
        query_status(address, endpoint.secret, std::chrono::milliseconds(500));
      } catch (const Error&) {
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.reset();
  CHECK(!fs::exists(status_file));
  asking = false;
  late.join();
  stepping = false;
  stepper.join();
  CHECK_THROWS_AS(query_status(address, endpoint.secret, std::chrono::milliseconds(500)), Error);
}

TEST_CASE("run: the status server answers only a client that holds the job secret", "[runtime][run][security]") {
  TempDir dir;
  StatusServer server([](const std::string&) { return nlohmann::json{{"job", "secret-state"}}; }, "");
  CHECK(query_status(server.address(), std::nullopt, std::chrono::seconds(10)).value("job", "") == "secret-state");
  const auto other = security::JobSecret::from_text("not-this-jobs-secret", "test");
  CHECK_THROWS_WITH(query_status(server.address(), other, std::chrono::seconds(10)),
                    Catch::Contains("refused us: authentication failed") || Catch::Contains("cannot read from"));
  // A raw client that sends nothing valid gets the challenge and then a closed connection, never the JSON.
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  const auto colon = server.address().rfind(':');
  sock.connect({asio::ip::make_address(server.address().substr(0, colon)),
                static_cast<uint16_t>(std::stoi(server.address().substr(colon + 1)))});
  CHECK_FALSE(testing::raw_client_handshake(sock, other, security::Service::kStatus));
  std::string rest(256, '\0');
  boost::system::error_code ec;
  const size_t n = sock.read_some(asio::buffer(rest), ec);
  CHECK(n == 0);
  CHECK(rest.find("secret-state") == std::string::npos);
}

}  // namespace
}  // namespace braid::runtime
