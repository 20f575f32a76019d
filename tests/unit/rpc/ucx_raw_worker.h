// A bare UCX worker for the UCX transport tests: it speaks (or mangles) the transport's active messages,
// with or without the stream token (rpc/ucx/ucx_envelope.h). Include only when BRAID_HAVE_UCX.
#pragma once

#include <ucp/api/ucp.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rpc/ucx/ucx_context.h"
#include "rpc/ucx/ucx_envelope.h"
#include "rpc/wire.h"
#include "security/stream_token.h"

namespace braid::rpc::ucx_test {

class RawWorker {
 public:
  using Clock = std::chrono::steady_clock;

  RawWorker() {
    ucp_config_t* config = nullptr;
    REQUIRE(ucp_config_read(nullptr, nullptr, &config) == UCS_OK);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM;
    REQUIRE(ucp_init(&params, config, &context_) == UCS_OK);
    ucp_config_release(config);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    REQUIRE(ucp_worker_create(context_, &wp, &worker_) == UCS_OK);
    ucp_address_t* address = nullptr;
    size_t length = 0;
    REQUIRE(ucp_worker_get_address(worker_, &address, &length) == UCS_OK);
    address_.assign(reinterpret_cast<uint8_t*>(address), reinterpret_cast<uint8_t*>(address) + length);
    ucp_worker_release_address(worker_, address);
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = ucx_detail::kResetAmId;
    hp.cb = [](void* arg, const void*, size_t, void* data, size_t data_length, const ucp_am_recv_param_t*) {
      static_cast<RawWorker*>(arg)->resets_.emplace_back(static_cast<const char*>(data), data_length);
      return UCS_OK;
    };
    hp.arg = this;
    REQUIRE(ucp_worker_set_am_recv_handler(worker_, &hp) == UCS_OK);
    hp.id = ucx_detail::kFrameAmId;
    hp.cb = [](void* arg, const void* header, size_t header_length, void*, size_t, const ucp_am_recv_param_t*) {
      auto* self = static_cast<RawWorker*>(arg);
      const auto* bytes = static_cast<const uint8_t*>(header);
      self->frames_.push_back(ucx_detail::decode_envelope({bytes, header_length}));
      self->headers_.emplace_back(bytes, bytes + header_length);
      return UCS_OK;  // a rendezvous is released unread
    };
    REQUIRE(ucp_worker_set_am_recv_handler(worker_, &hp) == UCS_OK);
  }
  ~RawWorker() {
    if (ep_ != nullptr) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(ep_, &p);
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);
    }
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }
  RawWorker(const RawWorker&) = delete;
  RawWorker& operator=(const RawWorker&) = delete;

  // As a transport publishes it: this one worker stands for both the data and the monitor worker.
  std::vector<uint8_t> address() const { return ucx_detail::pack_addresses({address_, address_, nonce_}); }
  const security::Nonce& nonce() const { return nonce_; }
  const std::vector<std::string>& resets() const { return resets_; }
  const std::vector<ucx_detail::Envelope>& frames() const { return frames_; }
  const std::vector<std::vector<uint8_t>>& headers() const { return headers_; }

  // Connects to the data worker of the transport whose local_address() is `to`.
  void connect(const std::vector<uint8_t>& to) {
    const std::vector<uint8_t> data = ucx_detail::unpack_addresses(to, "test").data;
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address = reinterpret_cast<const ucp_address_t*>(data.data());
    REQUIRE(ucp_ep_create(worker_, &p, &ep_) == UCS_OK);
  }
  // Sends one active message and progresses until it is out.
  void send(unsigned id, const std::vector<uint8_t>& header, const std::vector<uint8_t>& data) {
    ucp_request_param_t p{};
    void* r = ucp_am_send_nbx(ep_, id, header.data(), header.size(), data.data(), data.size(), &p);
    REQUIRE_FALSE(UCS_PTR_IS_ERR(r));
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    while (r != nullptr && ucp_request_check_status(r) == UCS_INPROGRESS && Clock::now() < deadline) {
      ucp_worker_progress(worker_);
    }
    if (r != nullptr) ucp_request_free(r);
  }
  bool wait_resets(size_t n) {
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    while (resets_.size() < n && Clock::now() < deadline) ucp_worker_progress(worker_);
    return resets_.size() >= n;
  }
  // Progresses this worker (so that the transport's endpoints to it connect) until `done`, at least
  // `at_least` and at most 3 s (10 s with `long_wait`: for a condition that a loaded machine may delay).
  bool progress_until(const std::function<bool()>& done,
                      std::chrono::milliseconds at_least = std::chrono::milliseconds(0), bool long_wait = false) {
    const auto start = Clock::now();
    const auto limit = std::chrono::seconds(long_wait ? 10 : 3);
    while (Clock::now() < start + limit) {
      ucp_worker_progress(worker_);
      if (Clock::now() >= start + at_least && done()) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return false;
  }
  bool wait_frames(size_t n) {
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    while (frames_.size() < n && Clock::now() < deadline) ucp_worker_progress(worker_);
    return frames_.size() >= n;
  }

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::vector<uint8_t> address_;
  security::Nonce nonce_ = security::fresh_nonce();
  std::vector<std::string> resets_;
  std::vector<ucx_detail::Envelope> frames_;
  std::vector<std::vector<uint8_t>> headers_;
};

// What a sender needs to sign the first message of a stream to one receiver.
struct Signer {
  security::JobSecret secret;
  int receiver = -1;
  std::vector<uint8_t> receiver_address;  // its local_address(): the nonce is in it
  security::Nonce sender_nonce{};
};

// Envelope (+ stream token when `signer` is given, + frame prefix of `msg` when given) as the transport
// would send it from `sender`.
inline std::vector<uint8_t> header_for(int sender, uint64_t stream, uint64_t seq, const Message* msg,
                                       const Signer* signer = nullptr) {
  std::vector<uint8_t> prefix;
  if (msg != nullptr) frame_prefix(*msg, prefix);
  ucx_detail::Envelope env;
  env.flags = msg != nullptr ? ucx_detail::kPrefixInHeader : 0;
  if (signer != nullptr) env.flags |= ucx_detail::kHasStreamToken;
  env.sender = sender;
  env.prefix_bytes = static_cast<uint32_t>(prefix.size());
  env.stream = stream;
  env.seq = seq;
  std::vector<uint8_t> out(ucx_detail::kEnvelopeBytes);
  ucx_detail::encode_envelope(env, out.data());
  if (signer != nullptr) {
    security::StreamTokenFields fields;
    fields.sender = sender;
    fields.receiver = signer->receiver;
    fields.stream = stream;
    fields.receiver_nonce = ucx_detail::unpack_addresses(signer->receiver_address, "test").nonce;
    fields.sender_nonce = signer->sender_nonce;
    const security::StreamToken token = security::stream_token(signer->secret, fields);
    out.insert(out.end(), token.begin(), token.end());
  }
  out.insert(out.end(), prefix.begin(), prefix.end());
  return out;
}

}  // namespace braid::rpc::ucx_test
