// UcxTransport on the progress thread: endpoints (a data and a monitor endpoint per peer), sending
// frames and resets, completions, and peer failures.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/logging.h"
#include "rpc/ucx/ucx_transport_impl.h"

namespace braid::rpc::ucx_detail {

namespace {

auto& log() { return *logging::get("braid.rpc"); }

constexpr size_t kMaxResetReason = 1024;

}  // namespace

UcxTransport::Connection& UcxTransport::connection(int peer) {
  auto& slot = connections_[peer];
  if (!slot) {
    slot = std::make_unique<Connection>();
    slot->owner = this;
    slot->peer = peer;
    new_stream(*slot);
  }
  return *slot;
}

void UcxTransport::new_stream(Connection& c) {
  // Random: the id is what binds a stream's later messages to its authenticated first one (ucx_receiver.h),
  // and a restarted peer process never continues an old stream by accident.
  security::random_bytes({reinterpret_cast<uint8_t*>(&c.stream), sizeof(c.stream)});
  c.next_seq = 0;
}

void UcxTransport::encode_header(const Connection& c, const Envelope& env, uint8_t* out) const {
  encode_envelope(env, out);
  if (!env.has_token()) return;
  security::StreamTokenFields fields;
  fields.service = security::Service::kRpcUcx;
  fields.sender = self_id_;
  fields.receiver = c.peer;
  fields.stream = env.stream;
  fields.receiver_nonce = c.peer_nonce;
  fields.sender_nonce = nonce_;
  const security::StreamToken token = security::stream_token(secret_, fields);
  std::memcpy(out + kEnvelopeBytes, token.data(), token.size());
}

ucp_ep_h UcxTransport::create_endpoint(Connection& c, bool monitor, const std::vector<uint8_t>& address,
                                       ucs_status_t* status) {
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = monitor ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  // Also on the data endpoint: UCX then reports a transfer that failed because the peer died to us
  // instead of tearing down its own endpoint under messages still queued from that peer.
  params.err_handler.cb = &UcxTransport::on_ep_error;
  params.err_handler.arg = &c;
  ucp_ep_h ep = nullptr;
  *status = ucp_ep_create((monitor ? monitor_worker_ : data_worker_)->get(), &params, &ep);
  return *status == UCS_OK ? ep : nullptr;
}

bool UcxTransport::ensure_connected(Connection& c) {
  if (c.data != nullptr) return true;
  WorkerAddresses address;
  {
    std::shared_lock lock(peers_mu_);
    const auto it = peers_.find(c.peer);
    if (it != peers_.end()) address = it->second.address;
  }
  if (address.data.empty()) return false;  // a sender not (yet) in add_peers: its first send() connects
  const auto now = std::chrono::steady_clock::now();
  if (now < c.retry_at) {
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(c.retry_at - now).count();
    report_failure(c.peer,
                   fmt::format("{} failed {} times in a row; the next connect is tried in {} ms", peer_label(c.peer),
                               c.failures_in_row, wait),
                   /*quiet=*/true);
    return false;
  }
  c.failed = false;
  c.generation = ++generations_made_;
  c.peer_nonce = address.nonce;
  ucs_status_t st = UCS_OK;
  c.data = create_endpoint(c, false, address.data, &st);
  if (c.data == nullptr) {
    ++c.failed_connects;
    fail_peer(c.peer, fmt::format("cannot reach {}: creating an endpoint to its data worker failed: {}",
                                  peer_label(c.peer), status_text(st)));
    return false;
  }
  if (monitors_) {
    c.monitor = create_endpoint(c, true, address.monitor, &st);
    if (c.monitor == nullptr) {
      // start() found that this transport can make monitors, so the peer's listener refused: it is gone.
      ++c.failed_connects;
      fail_peer(c.peer, fmt::format("cannot reach {}: creating an endpoint to its monitor worker failed: {}",
                                    peer_label(c.peer), status_text(st)));
      return false;
    }
  }
  c.failed_connects = 0;
  log().debug("ucx transport (worker {}): connected to {} (monitor: {})", self_id_, peer_label(c.peer),
              c.monitor != nullptr ? "yes" : "no");
  return true;
}

void UcxTransport::post(Outgoing&& out) {
  Connection& c = connection(out.peer);
  if (!ensure_connected(c)) {
    returned_buffers_.push_back(std::move(out.buffer));  // dropped: the failure was reported
    return;
  }
  auto op = std::make_unique<SendOp>();
  op->owner = this;
  op->peer = out.peer;
  op->generation = c.generation;
  op->msg = std::move(out.msg);
  op->buffer = std::move(out.buffer);
  Envelope env;
  env.sender = self_id_;
  env.prefix_bytes = static_cast<uint32_t>(op->buffer.size());
  env.stream = c.stream;
  env.seq = c.next_seq++;
  if (env.seq == 0) env.flags |= kHasStreamToken;  // the stream's first message proves the secret
  const size_t fixed = env.fixed_header_bytes();
  const auto spans = payload_spans(op->msg);
  const void* header = nullptr;
  size_t header_length = 0;
  const void* data = nullptr;
  size_t count = 0;
  ucp_datatype_t datatype = ucp_dt_make_contig(1);
  if (fixed + op->buffer.size() <= data_worker_->max_am_header()) {
    // The usual case: the receiver learns the tensors from the header, before any payload byte moves.
    env.flags |= kPrefixInHeader;
    op->buffer.insert(op->buffer.begin(), fixed, 0);
    encode_header(c, env, op->buffer.data());
    header = op->buffer.data();
    header_length = op->buffer.size();
    if (spans.size() == 1) {
      data = spans[0].data();
      count = spans[0].size();
    } else if (spans.size() > 1) {
      for (const auto& s : spans) op->iov.push_back({const_cast<uint8_t*>(s.data()), s.size()});
      data = op->iov.data();
      count = op->iov.size();
      datatype = ucp_dt_make_iov();
    }
  } else {
    encode_header(c, env, op->envelope.data());
    header = op->envelope.data();
    header_length = fixed;
    op->iov.push_back({op->buffer.data(), op->buffer.size()});
    for (const auto& s : spans) op->iov.push_back({const_cast<uint8_t*>(s.data()), s.size()});
    data = op->iov.data();
    count = op->iov.size();
    datatype = ucp_dt_make_iov();
  }
  submit(c.data, kFrameAmId, std::move(op), header, header_length, data, count, datatype);
}

void UcxTransport::post_reset(int peer, uint64_t stream, const std::string& reason) {
  Connection& c = connection(peer);
  if (!ensure_connected(c)) return;
  auto op = std::make_unique<SendOp>();
  op->owner = this;
  op->peer = peer;
  op->generation = c.generation;
  op->reset = true;
  op->text = reason.substr(0, kMaxResetReason);
  Envelope env;
  env.sender = self_id_;
  env.stream = stream;
  encode_envelope(env, op->envelope.data());
  const void* header = op->envelope.data();
  const void* text = op->text.data();
  const size_t length = op->text.size();
  submit(c.data, kResetAmId, std::move(op), header, kEnvelopeBytes, text, length, ucp_dt_make_contig(1));
}

void UcxTransport::submit(ucp_ep_h ep, unsigned am_id, std::unique_ptr<SendOp> op, const void* header,
                          size_t header_length, const void* data, size_t count, ucp_datatype_t datatype) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.cb.send = &UcxTransport::on_send_done;
  param.user_data = op.get();
  param.datatype = datatype;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  void* request = ucp_am_send_nbx(ep, am_id, header, header_length, data, count, &param);
  if (request == nullptr) {
    sent_ok(op->peer, op->generation);
    finish(std::move(op));  // sent (or buffered by UCX) at once
    return;
  }
  if (UCS_PTR_IS_ERR(request)) {
    const int peer = op->peer;
    finish(std::move(op));
    fail_peer(peer, fmt::format("sending to {} failed: {}", peer_label(peer), status_text(UCS_PTR_STATUS(request))));
    return;
  }
  op->request = request;
  SendOp* raw = op.get();
  in_flight_.emplace(raw, std::move(op));
}

void UcxTransport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  ucp_request_free(request);
  auto* raw = static_cast<SendOp*>(user_data);
  UcxTransport* self = raw->owner;
  const auto it = self->in_flight_.find(raw);
  if (it == self->in_flight_.end()) return;  // not expected: every pending op is registered
  std::unique_ptr<SendOp> op = std::move(it->second);
  self->in_flight_.erase(it);
  if (status == UCS_OK) self->sent_ok(op->peer, op->generation);
  // CANCELED: this worker closed the endpoint (a failure already reported, or shutdown).
  if (status != UCS_OK && status != UCS_ERR_CANCELED && !self->tearing_down_) {
    self->ep_errors_.push_back({op->peer, op->generation,
                                fmt::format("sending to {} failed: {}", self->peer_label(op->peer),
                                            status_text(status))});
  }
  self->finish(std::move(op));
}

void UcxTransport::finish(std::unique_ptr<SendOp> op) {
  if (!op->reset) returned_buffers_.push_back(std::move(op->buffer));
  // `op` and its message (and so the tensors) are released here.
}

void UcxTransport::sent_ok(int peer, uint64_t generation) {
  Connection& c = connection(peer);
  if (c.generation != generation || c.failures_in_row == 0) return;
  c.failures_in_row = 0;
  c.retry_at = {};
}

void UcxTransport::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* c = static_cast<Connection*>(arg);
  UcxTransport* self = c->owner;
  if (ep != c->data && ep != c->monitor) return;  // an endpoint of an earlier generation, already closed
  if (self->tearing_down_) return;
  self->ep_errors_.push_back({c->peer, c->generation,
                              fmt::format("the connection to {} failed: {}", self->peer_label(c->peer),
                                          status_text(status))});
}

void UcxTransport::fail_peer(int peer, const std::string& reason) {
  if (tearing_down_) return;
  Connection& c = connection(peer);
  if (c.failed) {
    log().debug("ucx transport (worker {}): {} already failed; also: {}", self_id_, peer_label(peer), reason);
    return;
  }
  c.failed = true;
  if (++c.failures_in_row >= 2) {
    auto backoff = options_.connect_backoff;
    for (int i = 2; i < c.failures_in_row && backoff < options_.connect_backoff_max; ++i) backoff *= 2;
    c.retry_at = std::chrono::steady_clock::now() + std::min(backoff, options_.connect_backoff_max);
  }
  // Force: the peer is gone, a flush would wait for it forever. Requests still on them complete with
  // UCS_ERR_CANCELED (and release their messages).
  if (ucp_ep_h ep = std::exchange(c.data, nullptr)) close_endpoint(ep, true);
  if (ucp_ep_h ep = std::exchange(c.monitor, nullptr)) close_endpoint(ep, true);
  new_stream(c);
  // A peer that stays unreachable is reported on every send that tries it again, but logged once.
  report_failure(peer, reason, c.failed_connects > 1);
}

void UcxTransport::report_failure(int peer, const std::string& reason, bool quiet) {
  if (quiet) {
    log().debug("ucx transport (worker {}): peer failure (again): {}", self_id_, reason);
  } else {
    // A peer that shuts down is reported this way too: the agent logs an error only when calls were pending.
    log().info("ucx transport (worker {}): peer failure: {}", self_id_, reason);
  }
  if (!handlers_.on_peer_failure) return;
  try {
    handlers_.on_peer_failure(peer, reason);
  } catch (const std::exception& e) {
    log().error("ucx transport (worker {}): the peer-failure handler threw for {}: {}", self_id_, peer_label(peer),
                e.what());
  }
}

void UcxTransport::close_endpoint(ucp_ep_h ep, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransport::on_close_done;
  param.user_data = this;
  if (force) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  void* request = ucp_ep_close_nbx(ep, &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;  // closed (an error still releases it)
  closing_.insert(request);
}

void UcxTransport::on_close_done(void* request, ucs_status_t /*status*/, void* user_data) {
  static_cast<UcxTransport*>(user_data)->closing_.erase(request);
  ucp_request_free(request);
}

void UcxTransport::close_all_endpoints() {
  for (auto& [peer, c] : connections_) {
    if (ucp_ep_h ep = std::exchange(c->data, nullptr)) close_endpoint(ep, false);
    if (ucp_ep_h ep = std::exchange(c->monitor, nullptr)) close_endpoint(ep, false);
  }
}

bool UcxTransport::probe_monitor_support() {
  Connection probe;
  probe.owner = this;
  ucs_status_t st = UCS_OK;
  ucp_ep_h ep = create_endpoint(probe, true, monitor_worker_->address(), &st);
  if (ep == nullptr) {
    log().warn("ucx transport (worker {}): UCX offers no transport that reports a peer failure ({}); the failure of "
               "a peer will not be noticed. Keep tcp in UCX_TLS for it.", self_id_, status_text(st));
    return false;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* request = ucp_ep_close_nbx(ep, &param);
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(monitor_worker_->get());
    ucp_request_free(request);
  }
  return true;
}

void UcxTransport::release_requests() {
  for (auto& [raw, op] : in_flight_) {
    ucp_request_free(op->request);  // no callback runs for it any more
    op->request = nullptr;
  }
  for (void* request : closing_) ucp_request_free(request);
  closing_.clear();
  if (receiver_) receiver_->release_requests();
}

ucs_status_t UcxTransport::on_reset(const void* header, size_t header_length, void* data, size_t length,
                                    const ucp_am_recv_param_t* param) {
  try {
    const Envelope env = decode_envelope({static_cast<const uint8_t*>(header), header_length});
    std::string reason = "(no reason given)";
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0 && length > 0) {
      reason.assign(static_cast<const char*>(data), std::min(length, kMaxResetReason));
    }
    resets_.push_back({env.sender, env.stream, std::move(reason)});
  } catch (const std::exception& e) {
    log().error("ucx transport (worker {}): dropped a malformed reset message: {}", self_id_, e.what());
  }
  return UCS_OK;
}

}  // namespace braid::rpc::ucx_detail
