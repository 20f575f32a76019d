#include "runtime/run/status_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "base/check.h"
#include "base/logging.h"
#include "runtime/run/checkpoint_dir.h"
#include "security/asio_handshake.h"
#include "security/listen_address.h"

namespace braid::runtime {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr size_t kMaxRequest = 64;

// The status file carries the secret that `braid status` needs, so only its owner may read it: it is
// created with mode 0600 under a temporary name and renamed into place.
void write_private_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
  BRAID_CHECK_ARG(fd >= 0, "status_file: cannot create '{}': {}", tmp, std::strerror(errno));
  const bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  BRAID_CHECK_ARG(ok, "status_file: cannot write '{}': {}", tmp, std::strerror(errno));
  std::filesystem::rename(tmp, path);
}

std::string peer_text(const tcp::socket& socket) {
  boost::system::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  return ec ? std::string("an unknown address") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

}  // namespace

struct StatusServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<nlohmann::json(const std::string&)> snapshot;
  std::optional<security::JobSecret> secret;

  // One client: it proves the job secret within the handshake timeout, sends one request line (a longer
  // one is refused) and gets one JSON line.
  struct Client {
    tcp::socket socket;
    asio::steady_timer timer;
    std::string peer;
    std::string reply;
    asio::streambuf request{kMaxRequest};
    explicit Client(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()), peer(peer_text(socket)) {}
  };

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;  // the acceptor was closed
      auto c = std::make_shared<Client>(std::move(socket));
      c->timer.expires_after(kHandshakeTimeout);
      c->timer.async_wait([c](const boost::system::error_code& timer_ec) {
        if (timer_ec) return;
        logging::get("braid.run")->warn("status server: refused {}: no authentication within {} s", c->peer,
                                        kHandshakeTimeout.count());
        boost::system::error_code ignored;
        c->socket.close(ignored);
      });
      security::async_server_handshake(c->socket, *secret, security::Service::kStatus,
                                       [this, c](const security::HandshakeResult& r) { answer(c, r); });
      accept();
    });
  }

  void answer(const std::shared_ptr<Client>& c, const security::HandshakeResult& r) {
    c->timer.cancel();
    if (!r.ok()) {
      if (c->socket.is_open()) {
        logging::get("braid.run")->warn("status server: refused {}: authentication failed: {}", c->peer, r.describe());
      }
      boost::system::error_code ignored;
      c->socket.close(ignored);
      return;
    }
    // One request line ("status" or "trace"), at most kMaxRequest bytes: a longer one is refused.
    asio::async_read_until(c->socket, c->request, '\n', [this, c](const boost::system::error_code& rec, size_t n) {
      std::string request(asio::buffers_begin(c->request.data()),
                          asio::buffers_begin(c->request.data()) + static_cast<long>(n));
      if (!request.empty()) request.pop_back();
      try {
        BRAID_CHECK_ARG(!rec, "status: no request line ({})", rec.message());
        c->reply = snapshot(request).dump() + "\n";
      } catch (const std::exception& e) {
        c->reply = nlohmann::json{{"error", e.what()}}.dump() + "\n";
      }
      asio::async_write(c->socket, asio::buffer(c->reply), [c](const boost::system::error_code&, size_t) {
        boost::system::error_code ignored;
        c->socket.shutdown(tcp::socket::shutdown_both, ignored);
      });
    });
  }
};

StatusServer::StatusServer(std::function<nlohmann::json(const std::string&)> snapshot, const std::string& status_file)
    : impl_(std::make_unique<Impl>()), status_file_(status_file) {
  impl_->snapshot = std::move(snapshot);
  impl_->secret = security::job_secret();
  // Loopback unless the job spans hosts (BRAID_SOCKET_IFNAME) or asks for every interface (BRAID_BIND_ANY).
  const std::string host = security::listen_host("127.0.0.1");
  const tcp::endpoint endpoint(asio::ip::make_address(host), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  std::string reach = host;
  if (host == "0.0.0.0") {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    reach = name;
  }
  address_ = fmt::format("{}:{}", reach, impl_->acceptor.local_endpoint().port());
  impl_->accept();
  thread_ = std::thread([this] { impl_->io.run(); });
  if (!status_file_.empty()) {
    try {
      std::filesystem::create_directories(std::filesystem::path(status_file_).parent_path());
      write_private_file(status_file_, address_ + "\n" + impl_->secret->text() + "\n");
    } catch (const std::exception& e) {
      logging::get("braid.run")->warn("status_file: cannot write '{}': {}", status_file_, e.what());
    }
  }
  logging::get("braid.run")->debug("status endpoint on {} ({})", address_, status_file_);
}

StatusServer::~StatusServer() {
  asio::post(impl_->io, [this] {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
  });
  impl_->io.stop();
  if (thread_.joinable()) thread_.join();
  if (!status_file_.empty()) {
    std::error_code ec;
    std::filesystem::remove(status_file_, ec);
  }
}

StatusEndpoint read_status_address(const std::string& status_file) {
  std::ifstream in(status_file);
  BRAID_CHECK_ARG(in.good(), "status: '{}' does not exist: is the job running? (the driver writes its address there)",
                  status_file);
  StatusEndpoint endpoint;
  std::getline(in, endpoint.address);
  BRAID_CHECK_ARG(endpoint.address.find(':') != std::string::npos, "status: '{}' holds no host:port ('{}')",
                  status_file, endpoint.address);
  std::string secret;
  if (std::getline(in, secret) && !secret.empty()) {
    endpoint.secret = security::JobSecret::from_text(secret, "status file '" + status_file + "'");
  }
  return endpoint;
}

nlohmann::json query_status(const std::string& address, const std::optional<security::JobSecret>& given,
                            std::chrono::milliseconds timeout, const std::string& request) {
  const security::JobSecret secret = given ? *given : security::job_secret();
  const size_t colon = address.rfind(':');
  BRAID_CHECK_ARG(colon != std::string::npos && colon > 0, "status: '{}' is not HOST:PORT", address);
  asio::io_context io;
  tcp::socket socket(io);
  std::string reply;
  boost::system::error_code result = asio::error::would_block;
  std::optional<security::HandshakeResult> refused;
  tcp::resolver resolver(io);
  asio::streambuf buf;
  const std::string line = request + "\n";
  auto read_reply = [&] {
    asio::async_write(socket, asio::buffer(line), [&](const boost::system::error_code& ec, size_t) {
      if (ec) {
        result = ec;
        return;
      }
      asio::async_read(socket, buf, [&](const boost::system::error_code& ec2, size_t) {
        result = ec2 == asio::error::eof ? boost::system::error_code{} : ec2;
      });
    });
  };
  resolver.async_resolve(
      address.substr(0, colon), address.substr(colon + 1),
      [&](const boost::system::error_code& ec, const tcp::resolver::results_type& endpoints) {
        if (ec) {
          result = ec;
          return;
        }
        asio::async_connect(socket, endpoints, [&](const boost::system::error_code& ec2, const tcp::endpoint&) {
          if (ec2) {
            result = ec2;
            return;
          }
          security::async_client_handshake(socket, secret, security::Service::kStatus,
                                           [&](const security::HandshakeResult& r) {
                                             if (r.ok()) return read_reply();
                                             refused = r;
                                             result = asio::error::access_denied;
                                           });
        });
      });
  io.run_for(timeout);
  if (refused) {
    BRAID_THROW(Error, "status: {} refused us: authentication failed: {} (our secret {} is from {})", address,
                refused->describe(), secret.fingerprint(), secret.source());
  }
  if (result == asio::error::would_block) BRAID_THROW(Error, "status: no answer from {} within {} ms", address, timeout.count());
  BRAID_CHECK_TYPED(Error, !result, "status: cannot read from {}: {}", address, result.message());
  reply.assign(asio::buffers_begin(buf.data()), asio::buffers_end(buf.data()));
  try {
    return nlohmann::json::parse(reply);
  } catch (const nlohmann::json::exception& e) {
    BRAID_THROW(Error, "status: {} answered something that is not JSON: {}", address, e.what());
  }
}

std::string format_status(const nlohmann::json& s) {
  std::string out = fmt::format("job {} ({}): {}, step {}/{}\n", s.value("job", "?"), s.value("file", "?"),
                                s.value("state", "?"), s.value("step", 0), s.value("total_steps", 0));
  out += fmt::format("{:>5}  {:<8} {:<14} {:>8}  {}\n", "rank", "role", "state", "step", "last heartbeat");
  for (const auto& r : s.value("ranks", nlohmann::json::array())) {
    const double age = r.value("last_heartbeat_s", -1.0);
    out += fmt::format("{:>5}  {:<8} {:<14} {:>8}  {}\n", r.value("rank", -1), r.value("role", "?"),
                       r.value("state", "?"), r.value("step", 0), age < 0 ? std::string("-") : fmt::format("{:.1f} s ago", age));
  }
  return out;
}

}  // namespace braid::runtime
