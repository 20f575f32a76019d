// The driver's status endpoint for `braid status`: a TCP server (Boost.Asio, one thread) on a port the OS
// picks, on loopback unless BRAID_SOCKET_IFNAME or BRAID_BIND_ANY say otherwise (security/listen_address.h).
// Each client first proves the job secret (security/handshake.h, within 5 s, or it is closed and logged with
// its address); then it sends one request line ("status", or "trace" for `braid status --trace`; at most 64
// bytes) and gets one JSON line (what `snapshot(request)` returns), and the connection closes. Reads are
// asynchronous, so a stray or slow client holds only its own connection. Its address "host:port" and the
// job secret are written to the job's status_file (atomically, mode 0600: only the job's user can ask),
// and the file is removed when the server stops.
//
// The client side: read_status_address() and query_status(); format_status() is the table `braid status`
// prints.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <optional>

#include "security/job_secret.h"

namespace braid::runtime {

class StatusServer {
 public:
  StatusServer(std::function<nlohmann::json(const std::string& request)> snapshot, const std::string& status_file);
  ~StatusServer();  // stops and joins the thread, removes the status file
  StatusServer(const StatusServer&) = delete;
  StatusServer& operator=(const StatusServer&) = delete;

  const std::string& address() const { return address_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string status_file_;
  std::string address_;
  std::thread thread_;
};

struct StatusEndpoint {
  std::string address;                      // "host:port"
  std::optional<security::JobSecret> secret;  // the job's, when the file holds it
};
// What a status file holds; InvalidArgument naming the file when it is missing (no job running?).
StatusEndpoint read_status_address(const std::string& status_file);
// Connects to "host:port", proves `secret` (unset: the process's, security::job_secret()), sends `request`
// and reads the answer; Error naming the address on a refusal, any failure or after `timeout`.
nlohmann::json query_status(const std::string& address, const std::optional<security::JobSecret>& secret,
                            std::chrono::milliseconds timeout, const std::string& request = "status");
// The status as a table: job, state, step, then one line per rank.
std::string format_status(const nlohmann::json& status);

}  // namespace braid::runtime
