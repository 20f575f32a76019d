// runtime/network_env.h: the interfaces a multi-machine job picks with BRAID_SOCKET_IFNAME and
// GLOO_SOCKET_IFNAME, checked against the machine's interfaces (loopback, "lo", exists everywhere).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "runtime/network_env.h"

using namespace braid;
using namespace braid::runtime;

namespace {

// Sets (or, with nullptr, unsets) the two variables for a scope and restores them.
class NetworkEnv {
 public:
  NetworkEnv(const char* braid_ifname, const char* gloo_ifname) {
    set("BRAID_SOCKET_IFNAME", braid_ifname);
    set("GLOO_SOCKET_IFNAME", gloo_ifname);
  }
  ~NetworkEnv() {
    for (auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  NetworkEnv(const NetworkEnv&) = delete;
  NetworkEnv& operator=(const NetworkEnv&) = delete;

 private:
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("network_from_env: loopback defaults when nothing is set", "[network]") {
  NetworkEnv env(nullptr, nullptr);
  const NetworkChoice c = network_from_env();
  CHECK(c.gloo_devices.empty());
  CHECK(c.rpc_bind_host.empty());
}

TEST_CASE("network_from_env: BRAID_SOCKET_IFNAME picks gloo's device and RPC's address", "[network]") {
  NetworkEnv env("lo", nullptr);
  const NetworkChoice c = network_from_env();
  CHECK(c.gloo_devices == std::vector<std::string>{"lo"});
  CHECK(c.rpc_bind_host == "127.0.0.1");
}

TEST_CASE("network_from_env: GLOO_SOCKET_IFNAME wins for gloo and takes a list", "[network]") {
  NetworkEnv env(nullptr, "lo,lo");
  const NetworkChoice c = network_from_env();
  CHECK(c.gloo_devices == std::vector<std::string>{"lo", "lo"});
  CHECK(c.rpc_bind_host.empty());
}

TEST_CASE("network_from_env: unknown interfaces and bad lists name the variable", "[network]") {
  {
    NetworkEnv env("no-such-if0", nullptr);
    CHECK_THROWS_WITH(network_from_env(), Catch::Contains("BRAID_SOCKET_IFNAME=no-such-if0: no network interface") &&
                                              Catch::Contains("this machine has: ") && Catch::Contains("lo"));
  }
  {
    NetworkEnv env("lo,lo", nullptr);
    CHECK_THROWS_WITH(network_from_env(), Catch::Contains("one interface only"));
  }
  {
    NetworkEnv env(nullptr, "lo,,lo");
    CHECK_THROWS_WITH(network_from_env(), Catch::Contains("GLOO_SOCKET_IFNAME='lo,,lo': an empty interface name"));
  }
  {
    NetworkEnv env(nullptr, "lo,no-such-if1");
    CHECK_THROWS_AS(network_from_env(), InvalidArgument);
  }
  CHECK(interface_ipv4("lo", "test") == "127.0.0.1");
}
