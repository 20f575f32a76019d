#include "runtime/run/status_server.h"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <filesystem>
#include <fstream>

#include "base/check.h"
#include "base/logging.h"
#include "runtime/run/checkpoint_dir.h"

namespace braid::runtime {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr size_t kMaxRequest = 64;

struct StatusServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::function<nlohmann::json(const std::string&)> snapshot;

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;  // the acceptor was closed
      auto s = std::make_shared<tcp::socket>(std::move(socket));
      // One request line ("status" or "trace"), at most kMaxRequest bytes: a longer one is refused.
      auto in = std::make_shared<asio::streambuf>(kMaxRequest);
      asio::async_read_until(*s, *in, '\n', [this, s, in](const boost::system::error_code& rec, size_t n) {
        std::string request(asio::buffers_begin(in->data()), asio::buffers_begin(in->data()) + static_cast<long>(n));
        if (!request.empty()) request.pop_back();
        std::string text;
        try {
          BRAID_CHECK_ARG(!rec, "status: no request line ({})", rec.message());
          text = snapshot(request).dump() + "\n";
        } catch (const std::exception& e) {
          text = nlohmann::json{{"error", e.what()}}.dump() + "\n";
        }
        auto buf = std::make_shared<std::string>(std::move(text));
        asio::async_write(*s, asio::buffer(*buf), [s, buf](const boost::system::error_code&, size_t) {
          boost::system::error_code ignored;
          s->shutdown(tcp::socket::shutdown_both, ignored);
        });
      });
      accept();
    });
  }
};

StatusServer::StatusServer(std::function<nlohmann::json(const std::string&)> snapshot, const std::string& status_file)
    : impl_(std::make_unique<Impl>()), status_file_(status_file) {
  impl_->snapshot = std::move(snapshot);
  // Every interface: `braid status` may run on another host than the driver.
  const tcp::endpoint endpoint(tcp::v4(), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  address_ = fmt::format("{}:{}", host, impl_->acceptor.local_endpoint().port());
  impl_->accept();
  thread_ = std::thread([this] { impl_->io.run(); });
  if (!status_file_.empty()) {
    try {
      std::filesystem::create_directories(std::filesystem::path(status_file_).parent_path());
      write_file_atomically(status_file_, address_ + "\n");
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

std::string read_status_address(const std::string& status_file) {
  std::ifstream in(status_file);
  BRAID_CHECK_ARG(in.good(), "status: '{}' does not exist: is the job running? (the driver writes its address there)",
                  status_file);
  std::string address;
  std::getline(in, address);
  BRAID_CHECK_ARG(address.find(':') != std::string::npos, "status: '{}' holds no host:port ('{}')", status_file, address);
  return address;
}

nlohmann::json query_status(const std::string& address, std::chrono::milliseconds timeout, const std::string& request) {
  const size_t colon = address.rfind(':');
  BRAID_CHECK_ARG(colon != std::string::npos && colon > 0, "status: '{}' is not HOST:PORT", address);
  asio::io_context io;
  tcp::socket socket(io);
  std::string reply;
  boost::system::error_code result = asio::error::would_block;
  tcp::resolver resolver(io);
  asio::streambuf buf;
  const std::string line = request + "\n";
  resolver.async_resolve(address.substr(0, colon), address.substr(colon + 1),
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
                             asio::async_write(socket, asio::buffer(line), [&](const boost::system::error_code& ec4, size_t) {
                               if (ec4) {
                                 result = ec4;
                                 return;
                               }
                               asio::async_read(socket, buf, [&](const boost::system::error_code& ec3, size_t) {
                                 result = ec3 == asio::error::eof ? boost::system::error_code{} : ec3;
                               });
                             });
                           });
                         });
  io.run_for(timeout);
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
