#include "rpc/ucx/ucx_receiver.h"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <string_view>
#include <utility>

#include "base/check.h"
#include "base/logging.h"
#include "rpc/ucx/ucx_context.h"

namespace braid::rpc::ucx_detail {

struct UcxReceiver::Incoming {
  UcxReceiver* owner = nullptr;
  StreamKey key;
  Envelope env;
  Message msg;
  bool complete = false;
  bool fetching = false;               // a rendezvous fetch is in flight (its callback holds a pointer here)
  ucs_status_t fetch_status = UCS_OK;
  void* request = nullptr;             // the fetch's request while it is in flight
  void* descriptor = nullptr;          // a rendezvous descriptor not yet handed to ucp_am_recv_data_nbx
  size_t length = 0;                   // of the AM data
  std::vector<uint8_t> head;           // the AM header, kept while the fetch waits for the budget
  std::vector<ucp_dt_iov_t> iov;       // fetch targets when there are several tensors
  std::vector<uint8_t> staging;        // fetch target when the prefix travels in the data
};

namespace {

ucs_status_t frame_handler(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param) {
  return static_cast<UcxReceiver*>(arg)->on_frame(header, header_length, data, length, param);
}

}  // namespace

UcxReceiver::UcxReceiver(ucp_worker_h worker, const WireLimits& limits, int self_id, size_t fetch_budget,
                         StreamAuth auth)
    : worker_(worker), auth_(std::move(auth)), limits_(limits), self_id_(self_id), fetch_budget_(fetch_budget) {}

UcxReceiver::~UcxReceiver() = default;

void UcxReceiver::install() {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  param.id = kFrameAmId;
  param.cb = &frame_handler;
  param.arg = this;
  const ucs_status_t st = ucp_worker_set_am_recv_handler(worker_, &param);
  if (st != UCS_OK) {
    BRAID_THROW(CommError, "ucx transport (worker {}): registering the frame handler failed: {}", self_id_,
                status_text(st));
  }
}

ucs_status_t UcxReceiver::on_frame(const void* header, size_t header_length, void* data, size_t length,
                                   const ucp_am_recv_param_t* param) {
  if (closed_) return UCS_OK;  // shutting down: eager data is dropped, a rendezvous is released unread
  const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const std::span<const uint8_t> head(static_cast<const uint8_t*>(header), header_length);
  Envelope env;
  try {
    env = decode_envelope(head);
  } catch (const std::exception& e) {
    refused_messages_.fetch_add(1, std::memory_order_relaxed);
    log_refusal(fmt::format("ucx transport (worker {}): dropped an active message of {} + {} bytes from an unknown "
                            "sender: {}", self_id_, header_length, length, e.what()));
    return UCS_OK;
  }
  const StreamKey key{env.sender, env.stream};
  auto sit = streams_.find(key);
  if (sit == streams_.end()) {
    // Nothing past the envelope is read (and a rendezvous is released unfetched) unless the token verifies.
    if (!admit(env, head, length)) return UCS_OK;
    sit = streams_.try_emplace(key).first;
    sit->second.sender = env.sender;
  }
  Stream& stream = sit->second;
  if (stream.dead) return UCS_OK;  // the rest of a stream that was already rejected
  auto in = std::make_unique<Incoming>();
  in->owner = this;
  in->key = key;
  in->env = env;
  try {
    check_frame_envelope(env, limits_);
    BRAID_CHECK_TYPED(WireError, env.seq >= stream.next_seq && stream.pending.count(env.seq) == 0,
                      "ucx envelope: message {} of stream {:016x} arrived twice (next expected: {})", env.seq,
                      env.stream, stream.next_seq);
    BRAID_CHECK_TYPED(WireError, env.seq - stream.next_seq < kMaxReorder,
                      "ucx envelope: message {} of stream {:016x} is {} ahead of the next expected one (at most {})",
                      env.seq, env.stream, env.seq - stream.next_seq, kMaxReorder);
    const size_t fixed = env.fixed_header_bytes();
    if (env.prefix_in_header()) {
      BRAID_CHECK_TYPED(WireError, header_length == fixed + env.prefix_bytes,
                        "ucx envelope: header of {} bytes, envelope says {} + {} (frame prefix)", header_length,
                        fixed, env.prefix_bytes);
    } else {
      BRAID_CHECK_TYPED(WireError, header_length == fixed,
                        "ucx envelope: header of {} bytes, expected {} (frame prefix in the data)", header_length,
                        fixed);
      BRAID_CHECK_TYPED(WireError, length >= env.prefix_bytes && length - env.prefix_bytes <= limits_.max_payload_bytes,
                        "ucx frame: data of {} bytes for a frame prefix of {} bytes and at most {} payload bytes",
                        length, env.prefix_bytes, limits_.max_payload_bytes);
    }
    if (!rendezvous) {
      if (env.prefix_in_header()) {
        parse_prefix(*in, head.subspan(fixed), length);
        const auto* bytes = static_cast<const uint8_t*>(data);
        size_t at = 0;
        for (const auto& span : receive_spans(in->msg)) {
          std::memcpy(span.data(), bytes + at, span.size());
          at += span.size();
        }
      } else {
        parse_whole(*in, {static_cast<const uint8_t*>(data), length});
      }
      in->complete = true;
    }
  } catch (const std::exception& e) {
    // WireError names the field; anything else (an allocation that failed) still must not escape.
    reject(key, stream, e.what(), true);
    return UCS_OK;
  }
  if (rendezvous) {
    in->descriptor = data;
    in->length = length;
    if (!may_fetch(length)) {
      // Over the budget: the descriptor is kept (UCS_INPROGRESS) and fetched by pump() later.
      in->head.assign(head.begin(), head.end());
      deferred_.emplace_back(key, env.seq);
      stream.pending.emplace(env.seq, std::move(in));
      return UCS_INPROGRESS;
    }
    if (!begin_fetch(key, stream, *in, head, true)) return UCS_OK;
  }
  if (in->complete && env.seq == stream.next_seq && stream.pending.empty()) {
    deliveries_.push_back({env.sender, std::move(in->msg), env.seq == 0});  // in order, nothing waiting
    ++stream.next_seq;
    return UCS_OK;
  }
  stream.pending.emplace(env.seq, std::move(in));
  deliver_ready(stream);
  return UCS_OK;
}

bool UcxReceiver::admit(const Envelope& env, std::span<const uint8_t> head, size_t data_length) {
  // Reasons are fixed text: a flood of refused messages costs no formatting beyond the logged ones.
  std::string_view why;
  if (env.seq != 0) {
    why = "a later message of a stream this worker has not authenticated";
  } else if (!env.has_token()) {
    why = "the first message of a stream, without a stream token";
  } else if (head.size() < kEnvelopeBytes + kStreamTokenBytes) {
    why = "a header too short for the stream token it announces";
  } else if (env.sender == self_id_) {
    why = "it claims this worker's own id";
  } else if (const auto nonce = auth_.peer_nonce(env.sender); !nonce) {
    why = "no worker of that id is among this worker's peers";
  } else {
    security::StreamTokenFields fields;
    fields.service = security::Service::kRpcUcx;
    fields.sender = env.sender;
    fields.receiver = self_id_;
    fields.stream = env.stream;
    fields.receiver_nonce = auth_.self_nonce;
    fields.sender_nonce = *nonce;
    const auto token = head.subspan(kEnvelopeBytes).first<kStreamTokenBytes>();
    if (security::verify_stream_token(auth_.secret, fields, token)) return true;
    why = "its stream token does not verify: the sender does not hold this job's secret";
  }
  refuse(env, head.size(), data_length, why);
  return false;
}

void UcxReceiver::refuse(const Envelope& env, size_t header_length, size_t data_length, std::string_view why) {
  refused_messages_.fetch_add(1, std::memory_order_relaxed);
  const StreamKey key{env.sender, env.stream};
  if (refusals_logged_ >= kMaxRefusalLogs || refused_.count(key) != 0) return;  // logged once per stream
  refused_.insert(key);
  log_refusal(fmt::format("ucx transport (worker {}): refused stream {:016x} claiming to be worker {} (message {}, {} "
                          "+ {} bytes): {}. It and every later message of it are dropped unread and unanswered "
                          "(UCX does not tell where an active message came from)", self_id_, env.stream, env.sender,
                          env.seq, header_length, data_length, why));
}

void UcxReceiver::log_refusal(const std::string& line) {
  if (refusals_logged_ >= kMaxRefusalLogs) return;
  ++refusals_logged_;
  auto& log = *logging::get("braid.rpc");
  log.error("{}", line);
  if (refusals_logged_ == kMaxRefusalLogs) {
    log.error("ucx transport (worker {}): {} refused messages logged; later ones are dropped without a log line",
              self_id_, kMaxRefusalLogs);
  }
}

bool UcxReceiver::begin_fetch(const StreamKey& key, Stream& stream, Incoming& in, std::span<const uint8_t> head,
                              bool in_callback) {
  try {
    if (in.env.prefix_in_header()) {
      parse_prefix(in, head.subspan(in.env.fixed_header_bytes()), in.length);
    } else {
      in.staging.resize(in.length);
    }
  } catch (const std::exception& e) {
    void* descriptor = std::exchange(in.descriptor, nullptr);
    if (!in_callback) ucp_am_data_release(worker_, descriptor);
    reject(key, stream, e.what(), true);
    return false;
  }
  std::vector<uint8_t>().swap(in.head);
  const Fetch fetch = start_fetch(in);  // UCX owns the descriptor from here on, whatever the outcome
  in.descriptor = nullptr;
  if (fetch == Fetch::kFailed) {
    reject(key, stream, fmt::format("fetching the data of message {} ({} bytes) failed: {}", in.env.seq, in.length,
                                    status_text(in.fetch_status)), false);
    return false;
  }
  if (fetch == Fetch::kDone) return finish_fetch(key, stream, in);
  return true;
}

bool UcxReceiver::pump() {
  bool any = false;
  while (!deferred_.empty()) {
    const auto [key, seq] = deferred_.front();
    const auto sit = streams_.find(key);
    if (sit == streams_.end()) {
      deferred_.pop_front();
      continue;
    }
    Stream& stream = sit->second;
    const auto it = stream.pending.find(seq);
    if (it == stream.pending.end() || it->second->descriptor == nullptr) {
      deferred_.pop_front();  // its stream was killed (and the descriptor released) meanwhile
      continue;
    }
    Incoming& in = *it->second;
    if (fetches_in_flight_ > 0 && bytes_fetching_ + in.length > fetch_budget_) break;
    deferred_.pop_front();
    any = true;
    const std::vector<uint8_t> head = std::move(in.head);
    if (begin_fetch(key, stream, in, head, false) && in.complete) deliver_ready(stream);
  }
  return any;
}

void UcxReceiver::parse_prefix(Incoming& in, std::span<const uint8_t> prefix, size_t payload_length) const {
  const FrameHeader h = decode_header(prefix, limits_);
  BRAID_CHECK_TYPED(WireError, prefix.size() == kFrameHeaderBytes + h.body_bytes(),
                    "ucx frame #{}: prefix of {} bytes, frame header says {} + {} (table) + {} (meta)", h.id,
                    prefix.size(), kFrameHeaderBytes, h.table_bytes, h.meta_bytes);
  BRAID_CHECK_TYPED(WireError, payload_length == h.payload_bytes,
                    "ucx frame #{}: {} bytes of tensor data, frame header says {}", h.id, payload_length,
                    h.payload_bytes);
  in.msg = decode_body(h, prefix.subspan(kFrameHeaderBytes));
}

void UcxReceiver::parse_whole(Incoming& in, std::span<const uint8_t> bytes) const {
  const size_t prefix_bytes = in.env.prefix_bytes;
  parse_prefix(in, bytes.first(prefix_bytes), bytes.size() - prefix_bytes);
  size_t at = prefix_bytes;
  for (const auto& span : receive_spans(in.msg)) {
    std::memcpy(span.data(), bytes.data() + at, span.size());
    at += span.size();
  }
}

UcxReceiver::Fetch UcxReceiver::start_fetch(Incoming& in) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE |
                       UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.cb.recv_am = &UcxReceiver::fetch_done;
  param.user_data = &in;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  param.datatype = ucp_dt_make_contig(1);
  void* buffer = in.staging.data();
  size_t count = in.staging.size();
  if (in.staging.empty()) {
    const auto spans = receive_spans(in.msg);
    if (spans.size() == 1) {
      buffer = spans[0].data();
      count = spans[0].size();
    } else if (spans.size() > 1) {
      in.iov.reserve(spans.size());
      for (const auto& s : spans) in.iov.push_back({s.data(), s.size()});
      param.datatype = ucp_dt_make_iov();
      buffer = in.iov.data();
      count = in.iov.size();
    }
  }
  void* request = ucp_am_recv_data_nbx(worker_, in.descriptor, buffer, count, &param);
  if (UCS_PTR_IS_ERR(request)) {
    in.fetch_status = UCS_PTR_STATUS(request);
    return Fetch::kFailed;
  }
  if (request == nullptr) return Fetch::kDone;
  in.fetching = true;
  in.request = request;
  ++fetches_in_flight_;
  bytes_fetching_ += in.length;
  return Fetch::kPending;
}

void UcxReceiver::fetch_done(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
  ucp_request_free(request);
  auto* in = static_cast<Incoming*>(user_data);
  in->owner->on_fetched(in, status);
}

void UcxReceiver::on_fetched(Incoming* in, ucs_status_t status) {
  in->fetching = false;
  in->request = nullptr;
  --fetches_in_flight_;
  bytes_fetching_ -= in->length;
  const StreamKey key = in->key;
  Stream& stream = streams_.at(key);  // streams are never erased
  if (closed_ || stream.dead) {
    stream.pending.erase(in->env.seq);
    return;
  }
  if (status != UCS_OK) {
    reject(key, stream, fmt::format("fetching the data of message {} failed: {}", in->env.seq, status_text(status)),
           false);
    return;
  }
  if (finish_fetch(key, stream, *in)) deliver_ready(stream);
}

bool UcxReceiver::finish_fetch(const StreamKey& key, Stream& stream, Incoming& in) {
  if (!in.staging.empty()) {
    try {
      parse_whole(in, in.staging);
    } catch (const std::exception& e) {
      reject(key, stream, e.what(), true);
      return false;
    }
    std::vector<uint8_t>().swap(in.staging);
  }
  in.complete = true;
  return true;
}

void UcxReceiver::deliver_ready(Stream& stream) {
  while (!stream.pending.empty()) {
    auto it = stream.pending.begin();
    if (it->first != stream.next_seq || !it->second->complete) break;
    deliveries_.push_back({stream.sender, std::move(it->second->msg), it->first == 0});
    stream.pending.erase(it);
    ++stream.next_seq;
  }
}

void UcxReceiver::kill(Stream& stream) {
  stream.dead = true;
  // Entries with a fetch in flight stay until its callback, which finds the stream dead and drops them;
  // those still waiting for the budget give their descriptor back (their sender's request completes).
  std::erase_if(stream.pending, [this](const auto& entry) {
    if (entry.second->descriptor != nullptr) ucp_am_data_release(worker_, entry.second->descriptor);
    return !entry.second->fetching;
  });
}

void UcxReceiver::reject(const StreamKey& key, Stream& stream, std::string reason, bool malformed) {
  kill(stream);
  rejections_.push_back({key.first, key.second, std::move(reason), malformed});
}

std::vector<Delivery> UcxReceiver::take_deliveries() {
  std::vector<Delivery> out;
  out.swap(deliveries_);
  return out;
}

std::vector<Rejection> UcxReceiver::take_rejections() {
  std::vector<Rejection> out;
  out.swap(rejections_);
  return out;
}

void UcxReceiver::close() {
  closed_ = true;
  for (auto& [key, stream] : streams_) kill(stream);
  deferred_.clear();
  deliveries_.clear();
  rejections_.clear();
}

void UcxReceiver::release_requests() {
  for (auto& [key, stream] : streams_) {
    for (auto& [seq, in] : stream.pending) {
      if (in->request == nullptr) continue;
      ucp_request_free(in->request);
      in->request = nullptr;
      in->fetching = false;
      --fetches_in_flight_;
      bytes_fetching_ -= in->length;
    }
  }
}

}  // namespace braid::rpc::ucx_detail
