// The driver's status endpoint for `braid status`: a TCP server (Boost.Asio, one thread) on a port the OS
// picks, which reads one request line ("status", or "trace" for `braid status --trace`; at most 64 bytes)
// and answers it with one JSON line (what `snapshot(request)` returns), then closes the connection. Reads
// are asynchronous, so a stray or slow client holds only its own connection. Its address "host:port" is
// written to the job's status_file (atomically) and the file is removed when the server stops.
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

// "host:port" from a status file; InvalidArgument naming the file when it is missing (no job running?).
std::string read_status_address(const std::string& status_file);
// Connects to "host:port", sends `request` and reads the answer; Error naming the address on failure or
// after `timeout`.
nlohmann::json query_status(const std::string& address, std::chrono::milliseconds timeout,
                            const std::string& request = "status");
// The status as a table: job, state, step, then one line per rank.
std::string format_status(const nlohmann::json& status);

}  // namespace braid::runtime
