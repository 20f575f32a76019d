// The receiving half of the UCX transport (private to rpc/ucx/): turns frame active messages into
// validated Messages and hands them over in each sender's send order. Used only on the progress thread.
//
// Order. Every message carries (sender, stream, seq) in its envelope (ucx_envelope.h). A stream is one
// connection of one sender; its messages are delivered strictly by seq. UCX calls the AM handler of one
// endpoint in send order, but a rendezvous message is complete only when its data has been fetched, so a
// small eager message that follows a large one would overtake it; such messages wait in the stream's
// reorder map until everything before them is complete. The map is bounded (kMaxReorder entries).
//
// Data. Eager data is copied into the tensors that decode_body() allocated. Rendezvous data is fetched
// with ucp_am_recv_data_nbx straight into the tensors' storage (one IOV entry per tensor), or into a
// staging buffer when the frame prefix travels in the data (ucx_envelope.h). Fetches are bounded: while
// fetch_budget bytes are being fetched, further rendezvous messages wait (their descriptors kept, their
// tensors not yet allocated, their senders' requests pending), so a fast sender of large messages
// cannot make this side allocate without limit.
//
// Authentication. A stream exists for the receiver only once its first message (sequence number 0) has
// brought a stream token that verifies: HMAC over the job secret, this worker's and the claimed sender's
// ids and nonces, and the stream (security/stream_token.h). Until then every message of it is dropped
// right after its envelope: its frame prefix is not parsed, nothing is allocated from the sizes it claims,
// a rendezvous's data is never fetched, and nothing is sent back (no reset, no failure reported against
// the worker it claims to be: that worker's real calls must not fail because a stranger used its id).
// Each refused stream is logged once, with the worker id it claimed and its stream id (UCX does not tell
// an active message's origin); the log lines are bounded, as is the memory that remembers them. Later
// messages of an authenticated stream are bound to it by the stream id: 64 random bits that only the
// two ends ever see.
//
// Errors. A malformed envelope or frame, a sequence number out of place or a failed fetch kills the
// stream (later messages on it are dropped) and is reported as a Rejection for the transport to log
// and act on; nothing is thrown out of a UCX callback. A message whose envelope cannot be read at all
// has no trustworthy sender: it is logged and dropped.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <deque>
#include <map>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rpc/message.h"
#include "rpc/ucx/ucx_envelope.h"
#include "rpc/wire.h"
#include "security/stream_token.h"

namespace braid::rpc::ucx_detail {

struct Delivery {
  int from = -1;
  Message msg;
  bool first_of_stream = false;  // sequence number 0: the sender (re)connected
};

struct Rejection {
  int peer = -1;
  uint64_t stream = 0;
  std::string reason;
  bool malformed = false;  // the peer sent something invalid (as opposed to a transfer that failed)
};

// What the receiver needs to authenticate a stream.
struct StreamAuth {
  security::JobSecret secret;
  security::Nonce self_nonce{};
  // The nonce a worker published with its address (add_peers); nullopt for an id this transport does not
  // know. Called on the progress thread.
  std::function<std::optional<security::Nonce>(int worker)> peer_nonce;
};

class UcxReceiver {
 public:
  static constexpr size_t kMaxReorder = 1u << 16;
  static constexpr size_t kDefaultFetchBudget = size_t{256} << 20;
  // Refused streams (and envelopes that could not be read) logged one by one; later ones are counted.
  static constexpr size_t kMaxRefusalLogs = 1024;

  // `fetch_budget`: bytes fetched at once (one fetch is always allowed, whatever its size).
  UcxReceiver(ucp_worker_h worker, const WireLimits& limits, int self_id, size_t fetch_budget, StreamAuth auth);
  ~UcxReceiver();
  UcxReceiver(const UcxReceiver&) = delete;
  UcxReceiver& operator=(const UcxReceiver&) = delete;

  // Registers the frame AM handler on the worker.
  void install();
  // The AM handler body (`param` as UCX passes it).
  ucs_status_t on_frame(const void* header, size_t header_length, void* data, size_t length,
                        const ucp_am_recv_param_t* param);

  // What arrived since the last call (moved out).
  std::vector<Delivery> take_deliveries();
  std::vector<Rejection> take_rejections();
  bool has_events() const { return !deliveries_.empty() || !rejections_.empty(); }
  size_t fetches_in_flight() const { return fetches_in_flight_; }
  // Messages dropped unread because their stream is not authenticated (any thread; for tests).
  uint64_t refused_messages() const { return refused_messages_.load(std::memory_order_relaxed); }
  // Starts the fetches that waited for the budget; true if it started any. Called outside UCX callbacks.
  bool pump();

  // Shutdown: nothing is delivered or rejected any more; fetches still in flight complete into the void.
  void close();
  // Teardown, after close(): hands the fetches still in flight back to UCX (no callback will run for
  // them), so that the worker can be destroyed.
  void release_requests();

 private:
  struct Incoming;
  struct Stream {
    int sender = -1;
    uint64_t next_seq = 0;
    bool dead = false;
    std::map<uint64_t, std::unique_ptr<Incoming>> pending;  // seq -> not yet deliverable
  };
  using StreamKey = std::pair<int, uint64_t>;  // (sender, stream)

  enum class Fetch { kFailed, kPending, kDone };

  // Whether the message whose envelope is `env` may open its stream (the token verifies); logs a refusal.
  bool admit(const Envelope& env, std::span<const uint8_t> head, size_t data_length);
  void refuse(const Envelope& env, size_t header_length, size_t data_length, std::string_view why);
  // Logs `line` while fewer than kMaxRefusalLogs refusals were logged.
  void log_refusal(const std::string& line);

  static void fetch_done(void* request, ucs_status_t status, size_t length, void* user_data);
  void on_fetched(Incoming* in, ucs_status_t status);
  // After the data arrived: parses a staged frame, marks `in` complete; false if it was rejected.
  bool finish_fetch(const StreamKey& key, Stream& stream, Incoming& in);

  // Parses header + table + meta into in.msg, checking the payload length the AM carries.
  void parse_prefix(Incoming& in, std::span<const uint8_t> prefix, size_t payload_length) const;
  // Parses a prefix + payload laid out back to back (eager data, or a staging buffer).
  void parse_whole(Incoming& in, std::span<const uint8_t> bytes) const;
  // Parses the frame (header bytes `head`) and starts its rendezvous fetch; false if `in` was rejected.
  // `in_callback`: inside the AM handler, where a descriptor that is not used is dropped by returning
  // UCS_OK; elsewhere it must be released.
  bool begin_fetch(const StreamKey& key, Stream& stream, Incoming& in, std::span<const uint8_t> head,
                   bool in_callback);
  // Starts the rendezvous fetch into in.msg's tensors or in.staging.
  Fetch start_fetch(Incoming& in);
  bool may_fetch(size_t length) const {
    return deferred_.empty() && (fetches_in_flight_ == 0 || bytes_fetching_ + length <= fetch_budget_);
  }
  void deliver_ready(Stream& stream);
  void kill(Stream& stream);
  void reject(const StreamKey& key, Stream& stream, std::string reason, bool malformed);

  ucp_worker_h worker_;
  StreamAuth auth_;
  WireLimits limits_;
  int self_id_;
  size_t fetch_budget_;
  bool closed_ = false;
  size_t fetches_in_flight_ = 0;
  size_t bytes_fetching_ = 0;
  std::deque<std::pair<StreamKey, uint64_t>> deferred_;  // (stream, seq) of messages waiting to be fetched
  std::map<StreamKey, Stream> streams_;  // authenticated ones only; dead ones stay (their leftovers are recognised)
  std::set<StreamKey> refused_;          // refused streams already logged (at most kMaxRefusalLogs)
  size_t refusals_logged_ = 0;
  std::atomic<uint64_t> refused_messages_{0};
  std::vector<Delivery> deliveries_;
  std::vector<Rejection> rejections_;
};

}  // namespace braid::rpc::ucx_detail
