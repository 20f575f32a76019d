// UcxTransport, the class behind make_ucx_transport (private to rpc/ucx/; ucx_transport.h has the
// design). ucx_transport.cc holds the life cycle, the public calls and the progress loop;
// ucx_connections.cc the endpoints, sends and failures.
//
// Threads: the public calls run on any thread and only touch the members under "shared" below (locks
// and atomics). Everything under "progress thread" is touched by the progress thread alone between
// start() and the end of its loop — every UCX call included — and by the owner before start() / after
// the join.
#pragma once

#include <ucp/api/ucp.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rpc/transport.h"
#include "rpc/ucx/ucx_context.h"
#include "rpc/ucx/ucx_envelope.h"
#include "rpc/ucx/ucx_receiver.h"

namespace braid::rpc::ucx_detail {

class UcxTransport final : public Transport {
 public:
  // How long the progress thread polls (yielding the core between polls) after its last event before it
  // sleeps on the event fds: long enough that a reply computed right after a delivery finds it awake.
  static constexpr std::chrono::microseconds kSpinBeforeSleep{50};
  // How long shutdown() lets sends finish and endpoints flush before the workers are destroyed.
  static constexpr std::chrono::milliseconds kCloseTimeout{1000};

  // `fetch_budget`: see UcxReceiver (tests use a small one).
  explicit UcxTransport(const TransportOptions& options,
                        size_t fetch_budget = UcxReceiver::kDefaultFetchBudget);
  ~UcxTransport() override;

  std::string name() const override { return "ucx"; }
  // Messages dropped unread because their stream did not authenticate (ucx_receiver.h). Any thread.
  uint64_t refused_messages() const { return receiver_ ? receiver_->refused_messages() : 0; }
  std::vector<uint8_t> local_address() const override { return address_; }
  std::string describe_address(const std::vector<uint8_t>& address) const override;
  void start(int self_id, TransportHandlers handlers) override;
  void add_peers(const std::vector<PeerInfo>& peers) override;
  void send(int peer, Message msg) override;
  void shutdown() override;

 private:
  // A message handed over by send(): its frame prefix is already encoded (by the caller).
  struct Outgoing {
    int peer = -1;
    Message msg;
    std::vector<uint8_t> buffer;  // frame prefix; the envelope is put in front on the progress thread
  };
  struct PeerEntry {
    std::string name;
    WorkerAddresses address;
  };
  // This transport's endpoints to one peer and its outgoing stream. The endpoints live as long as the
  // peer's workers do: they are closed only when the peer fails (and at shutdown), never re-made for a
  // live peer, because UCX pairs the endpoints of two workers by creation order and a one-sided
  // re-creation would pair them wrongly. A reset (the peer rejected our stream) only starts a new stream.
  struct Connection {
    UcxTransport* owner = nullptr;
    int peer = -1;
    ucp_ep_h data = nullptr;     // data worker, error mode NONE (shared memory possible), with a handler
    ucp_ep_h monitor = nullptr;  // monitor worker, error mode PEER, carries nothing
    uint64_t generation = 0;     // of the endpoints, so that late errors of closed ones are told apart
    uint64_t stream = 0;         // id of the outgoing stream in the envelopes
    uint64_t next_seq = 0;
    security::Nonce peer_nonce{};  // from the peer's address, for the token that opens each stream
    bool failed = false;         // endpoints failed and were closed; the next send connects again
    int failed_connects = 0;     // in a row: only the first one is logged as a warning
    // Failures with no completed send in between, and when the next connect may be tried: after the
    // second one reconnects wait connect_backoff, doubled per failure up to connect_backoff_max. A sender
    // that keeps sending to a dead peer made a connect per message, and one of those could abort inside
    // UCX 1.13 (tcp_ep.c: "!(ep->flags & UCT_TCP_EP_FLAG_CTX_TYPE_TX)").
    int failures_in_row = 0;
    std::chrono::steady_clock::time_point retry_at{};
  };
  // One ucp_am_send_nbx in flight: owns what UCX reads until the send completes.
  struct SendOp {
    UcxTransport* owner = nullptr;
    int peer = -1;
    uint64_t generation = 0;
    bool reset = false;  // a reset, not a frame
    Message msg;
    std::vector<uint8_t> buffer;                     // envelope + prefix (header), or the prefix (data)
    // The header when the prefix goes in the data: envelope [+ stream token].
    std::array<uint8_t, kEnvelopeBytes + kStreamTokenBytes> envelope{};
    std::vector<ucp_dt_iov_t> iov;
    std::string text;         // a reset's reason
    void* request = nullptr;  // while UCX holds the op
  };
  struct EpError {
    int peer = -1;
    uint64_t generation = 0;
    std::string reason;
  };
  struct ResetNotice {
    int peer = -1;
    uint64_t stream = 0;
    std::string reason;
  };

  std::string peer_label(int peer) const;
  bool on_progress_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  void wake();

  // Progress thread: ucx_transport.cc.
  void run();
  bool progress_workers();
  bool drain_queue();
  bool handle_events();
  void deliver(int from, Message msg);
  void sleep();
  void teardown();

  // Progress thread: ucx_connections.cc.
  Connection& connection(int peer);
  // Makes the endpoints to `c.peer` if there are none; false (failure reported) if that fails.
  bool ensure_connected(Connection& c);
  ucp_ep_h create_endpoint(Connection& c, bool monitor, const std::vector<uint8_t>& address, ucs_status_t* status);
  void post(Outgoing&& out);
  void post_reset(int peer, uint64_t stream, const std::string& reason);
  void submit(ucp_ep_h ep, unsigned am_id, std::unique_ptr<SendOp> op, const void* header, size_t header_length,
              const void* data, size_t count, ucp_datatype_t datatype);
  void finish(std::unique_ptr<SendOp> op);
  // A send of `generation`'s endpoints completed: the peer is reachable again, reconnects need no wait.
  void sent_ok(int peer, uint64_t generation);
  // The endpoints to `peer` failed: closes them (force) and reports once.
  void fail_peer(int peer, const std::string& reason);
  void report_failure(int peer, const std::string& reason, bool quiet = false);
  void new_stream(Connection& c);
  // Envelope [+ stream token, on message 0] into `out` (fixed_header_bytes() of them).
  void encode_header(const Connection& c, const Envelope& env, uint8_t* out) const;
  std::optional<security::Nonce> peer_nonce(int peer) const;
  void close_endpoint(ucp_ep_h ep, bool force);
  void close_all_endpoints();
  bool probe_monitor_support();
  void release_requests();
  ucs_status_t on_reset(const void* header, size_t header_length, void* data, size_t length,
                        const ucp_am_recv_param_t* param);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_close_done(void* request, ucs_status_t status, void* user_data);

  const TransportOptions options_;
  const size_t fetch_budget_;
  const security::JobSecret secret_;  // options_.secret or the process's
  const security::Nonce nonce_;       // this incarnation's, published in address_

  // Shared.
  mutable std::shared_mutex peers_mu_;
  std::unordered_map<int, PeerEntry> peers_;
  std::mutex queue_mu_;
  std::vector<Outgoing> queue_;
  std::vector<std::vector<uint8_t>> buffer_pool_;  // prefix buffers whose capacity is reused
  bool stopping_ = false;                           // under queue_mu_: send() refuses from now on
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  int wake_fd_ = -1;
  std::mutex life_mu_;  // start() / shutdown()
  bool shut_down_ = false;
  std::thread thread_;
  int self_id_ = -1;  // written by start() before started_ is published
  TransportHandlers handlers_;
  std::vector<uint8_t> address_;

  // Progress thread.
  std::unique_ptr<UcxContext> context_;
  // Two workers, so that every endpoint of one worker has the same error mode: UCX pairs the endpoints
  // of two workers by creation order and rejects a pair whose error modes differ.
  std::unique_ptr<UcxWorker> data_worker_;
  std::unique_ptr<UcxWorker> monitor_worker_;
  std::unique_ptr<UcxReceiver> receiver_;
  std::vector<Outgoing> batch_;  // the queue's contents being posted (its capacity is reused)
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;
  std::unordered_map<SendOp*, std::unique_ptr<SendOp>> in_flight_;
  std::unordered_set<void*> closing_;  // endpoint closes in flight
  std::vector<std::vector<uint8_t>> returned_buffers_;
  std::vector<EpError> ep_errors_;
  std::vector<ResetNotice> resets_;
  uint64_t generations_made_ = 0;
  bool monitors_ = false;  // probe_monitor_support()
  bool tearing_down_ = false;
};

}  // namespace braid::rpc::ucx_detail
