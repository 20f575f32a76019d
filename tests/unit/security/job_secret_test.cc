#include "security/job_secret.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "base/error.h"
#include "security/listen_address.h"

namespace braid::security {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "braid-secret-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& p, const std::string& text, mode_t mode) {
  std::ofstream(p) << text;
  REQUIRE(::chmod(p.c_str(), mode) == 0);
}

// Sets a variable for one scope and restores it after.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    if (value) ::setenv(name.c_str(), value, 1); else ::unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1); else ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("job secret: text, its key and a printable fingerprint", "[security]") {
  const auto a = JobSecret::from_text("0123456789abcdef", "test");
  const auto b = JobSecret::from_text("0123456789abcdef", "elsewhere");
  const auto c = JobSecret::from_text("0123456789abcdeg", "test");
  CHECK(a == b);
  CHECK_FALSE(a == c);
  CHECK(a.fingerprint().size() == 8);
  CHECK(a.fingerprint() != c.fingerprint());
  CHECK(a.fingerprint().find("0123") == std::string::npos);
  CHECK_THROWS_WITH(JobSecret::from_text("short", "BRAID_JOB_SECRET"),
                    Catch::Contains("BRAID_JOB_SECRET has 5 characters; it needs at least 16"));
}

TEST_CASE("job secret: generated secrets differ", "[security]") {
  const auto a = JobSecret::generate(), b = JobSecret::generate();
  CHECK(a.text().size() == 64);
  CHECK_FALSE(a == b);
}

TEST_CASE("job secret: a file only its owner may read", "[security]") {
  TempDir dir;
  const fs::path good = dir.path / "secret";
  write(good, "a-secret-from-a-file\n", 0600);
  CHECK(JobSecret::from_file(good) == JobSecret::from_text("a-secret-from-a-file", "test"));
  const fs::path open_to_all = dir.path / "readable";
  write(open_to_all, "a-secret-from-a-file\n", 0644);
  CHECK_THROWS_WITH(JobSecret::from_file(open_to_all), Catch::Contains("has mode 0644: others may read it"));
  CHECK_THROWS_WITH(JobSecret::from_file((dir.path / "missing").string()), Catch::Contains("cannot open"));
  const fs::path link = dir.path / "link";
  fs::create_symlink(good, link);
  CHECK_THROWS_WITH(JobSecret::from_file(link), Catch::Contains("cannot open"));  // O_NOFOLLOW
}

TEST_CASE("job secret: the environment, a file, else the per-user file created once and private", "[security]") {
  TempDir home;
  ScopedEnv h("HOME", home.path.c_str());
  ScopedEnv s("BRAID_JOB_SECRET", nullptr);
  ScopedEnv f("BRAID_JOB_SECRET_FILE", nullptr);
  const fs::path path = user_secret_path();
  CHECK(path == home.path / ".braid" / "job_secret");
  REQUIRE_FALSE(fs::exists(path));
  const auto created = resolve_job_secret();
  REQUIRE(fs::exists(path));
  CHECK((fs::status(path).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK(resolve_job_secret() == created);  // reused, not regenerated
  CHECK(created.source() == "file '" + path.string() + "'");
  {
    const fs::path file = home.path / "operator_secret";
    write(file, "the-operators-secret-file", 0400);
    ScopedEnv from_file("BRAID_JOB_SECRET_FILE", file.c_str());
    CHECK(resolve_job_secret() == JobSecret::from_text("the-operators-secret-file", "test"));
    ScopedEnv from_env("BRAID_JOB_SECRET", "the-operators-secret-text");
    CHECK(resolve_job_secret() == JobSecret::from_text("the-operators-secret-text", "test"));
  }
  ScopedEnv short_env("BRAID_JOB_SECRET", "too-short");
  CHECK_THROWS_WITH(resolve_job_secret(), Catch::Contains("BRAID_JOB_SECRET has 9 characters"));
}

TEST_CASE("listen address: loopback by default, every interface only when asked", "[security]") {
  ScopedEnv any("BRAID_BIND_ANY", nullptr);
  ScopedEnv iface("BRAID_SOCKET_IFNAME", nullptr);
  CHECK(listen_host("127.0.0.1") == "127.0.0.1");
  {
    ScopedEnv lo("BRAID_SOCKET_IFNAME", "lo");
    CHECK(listen_host("127.0.0.1") == "127.0.0.1");
  }
  {
    ScopedEnv bad("BRAID_SOCKET_IFNAME", "no-such-if0");
    CHECK_THROWS_WITH(listen_host("127.0.0.1"), Catch::Contains("BRAID_SOCKET_IFNAME=no-such-if0"));
  }
  ScopedEnv yes("BRAID_BIND_ANY", "1");
  CHECK(listen_host("127.0.0.1") == "0.0.0.0");
}

}  // namespace braid::security

namespace braid::security {

// The first IPv4 address of an interface other than lo, with its name; empty when the machine has none.
std::pair<std::string, std::string> some_network_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::pair<std::string, std::string> found;
  for (const ifaddrs* a = list; a != nullptr && found.first.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || std::string(a->ifa_name) == "lo") continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = {a->ifa_name, text};
  }
  ::freeifaddrs(list);
  return found;
}

// Nothing is sent: connecting a UDP socket only asks the kernel for the route. The route to another host
// is covered by the multihost tests (tests/multihost/), where each host has lo and eth0.
TEST_CASE("interface_toward: loopback peers give lo, this host's own address gives its interface", "[security]") {
  CHECK(interface_toward("127.0.0.1", "test") == "lo");
  CHECK(interface_toward("127.0.0.2", "test") == "lo");
  CHECK(interface_toward("localhost", "test") == "lo");
  const auto [name, address] = some_network_address();
  if (name.empty()) {
    WARN("this machine has no IPv4 address besides loopback; the own-address case is not checked");
    return;
  }
  // The kernel routes it through lo, but the rendezvous host must listen where the others reach it.
  CHECK(interface_toward(address, "test") == name);
  CHECK(interface_ipv4(interface_toward(address, "test"), "test") == address);
}

}  // namespace braid::security
