#include "rpc/tcp/tcp_address.h"

#include <fmt/format.h>

#include <charconv>

#include "base/check.h"

namespace braid::rpc::tcp_detail {

namespace asio = boost::asio;
using asio::ip::tcp;

HostPort parse_host_port(std::string_view text, std::string_view what) {
  const size_t colon = text.rfind(':');
  BRAID_CHECK_ARG(colon != std::string_view::npos && colon > 0 && colon + 1 < text.size(),
                  "{}: '{}' is not a host:port address", what, text);
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  BRAID_CHECK_ARG(ec == std::errc() && end == port_text.data() + port_text.size() && port >= 1 && port <= 65535,
                  "{}: '{}' has no valid port (1..65535)", what, text);
  BRAID_CHECK_ARG(!host.empty(), "{}: '{}' has an empty host", what, text);
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto address = ep.address();
  if (address.is_v6()) return fmt::format("[{}]:{}", address.to_string(), ep.port());
  return fmt::format("{}:{}", address.to_string(), ep.port());
}

tcp::endpoint resolve_endpoint(const HostPort& hp, std::string_view what) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(hp.host, ec);
  if (!ec) return tcp::endpoint(address, hp.port);
  asio::io_context io;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(hp.host, std::to_string(hp.port), ec);
  BRAID_CHECK_ARG(!ec && !results.empty(), "{}: cannot resolve host '{}': {}", what, hp.host,
                  ec ? ec.message() : std::string("no addresses"));
  // Prefer IPv4: the other workers listen on whatever bind_host resolved to, most often an IPv4 address.
  for (const auto& r : results) {
    if (r.endpoint().address().is_v4()) return r.endpoint();
  }
  return results.begin()->endpoint();
}

}  // namespace braid::rpc::tcp_detail
