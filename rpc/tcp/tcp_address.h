// Private to rpc/tcp: the "host:port" addresses the TCP transport publishes and connects to.
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace braid::rpc::tcp_detail {

struct HostPort {
  std::string host;  // without IPv6 brackets
  uint16_t port = 0;
};

// Splits "host:port" or "[v6]:port". Throws InvalidArgument naming `what` and the text.
HostPort parse_host_port(std::string_view text, std::string_view what);
// "127.0.0.1:4321" or "[::1]:4321".
std::string endpoint_text(const boost::asio::ip::tcp::endpoint& ep);
// A numeric address as is; a host name through the system resolver (blocking, so callers resolve before
// any io thread needs the endpoint). Throws InvalidArgument naming `what`.
boost::asio::ip::tcp::endpoint resolve_endpoint(const HostPort& hp, std::string_view what);

}  // namespace braid::rpc::tcp_detail
