// RpcAgent joining the job: publishing this worker's entry (name, transport address, the transport and why
// it was chosen) in the store, and reading every other worker's.
#include "rpc/agent.h"

#include <fmt/format.h>

#include "base/check.h"
#include "rpc/value_codec.h"

namespace braid::rpc {

namespace {

// The published entry of a worker: its name and transport address, or an error that stops the others
// from waiting for it (a duplicate name). The transport and why it was chosen travel along, so that a job whose workers chose differently (one
// built without UCX, one asked for tcp) fails at init naming both, rather than misread each other's addresses.
std::vector<uint8_t> encode_entry(const std::string& name, const std::vector<uint8_t>& address,
                                  const std::string& error, const std::string& transport, const std::string& reason) {
  std::vector<uint8_t> out;
  MetaWriter w(out);
  w.str(name);
  w.str(std::string(address.begin(), address.end()));
  w.str(error);
  w.str(transport);
  w.str(reason);
  return out;
}

}  // namespace

void RpcAgent::join_job(store::Store& store) {
  const auto taken = store.compare_set("names/" + self_.name, {}, store::to_bytes(std::to_string(self_.id)));
  const std::string owner_id = store::to_string(taken);
  std::string error;
  if (owner_id != std::to_string(self_.id)) {
    error = fmt::format("RPC worker name '{}' is already taken by worker {}", self_.name, owner_id);
  }
  const auto taken_id = store.compare_set("ids/" + std::to_string(self_.id), {}, store::to_bytes(self_.name));
  if (error.empty() && store::to_string(taken_id) != self_.name) {
    error = fmt::format("RPC worker id {} is already taken by worker '{}'", self_.id, store::to_string(taken_id));
  }
  store.set("workers/" + std::to_string(self_.id),
            encode_entry(self_.name, transport_->local_address(), error, transport_->name(), transport_reason_));
  if (!error.empty()) BRAID_THROW(InvalidArgument, "init_rpc: {}", error);

  std::vector<std::string> keys;
  for (int i = 0; i < world_size_; ++i) keys.push_back("workers/" + std::to_string(i));
  std::vector<store::Bytes> entries;
  try {
    entries = store.multi_get(keys, options_.join_timeout);
  } catch (const TimeoutError& e) {
    BRAID_THROW(TimeoutError, "init_rpc: worker '{}' waited {} ms for all {} workers to join: {}", self_.name,
                options_.join_timeout.count(), world_size_, e.what());
  }
  workers_.resize(static_cast<size_t>(world_size_));
  addresses_.resize(static_cast<size_t>(world_size_));
  std::vector<std::string> others;  // workers on another transport than this one: "'worker1' (id 1): tcp (why)"
  for (int i = 0; i < world_size_; ++i) {
    MetaReader r(entries[static_cast<size_t>(i)]);
    std::string name = r.str("worker name");
    std::string address = r.str("worker address");
    std::string peer_error = r.str("worker error");
    BRAID_CHECK_ARG(peer_error.empty(), "init_rpc: worker {} failed to join: {}", i, peer_error);
    std::string peer_transport = r.str("worker transport");
    std::string peer_reason = r.str("worker transport reason");
    if (peer_transport != transport_->name()) {
      others.push_back(fmt::format("'{}' (id {}) uses {} ({})", name, i, peer_transport, peer_reason));
    }
    workers_[static_cast<size_t>(i)] = WorkerInfo{name, i};
    addresses_[static_cast<size_t>(i)].assign(address.begin(), address.end());
    ids_by_name_.emplace(name, i);
  }
  if (!others.empty()) {
    BRAID_THROW(InvalidArgument,
                "init_rpc: the workers of this job disagree on the RPC transport: '{}' (id {}) uses {} ({}), but {}; "
                "every worker must use the same one (set rpc.transport, RpcBackendOptions.transport, to tcp or ucx "
                "on all of them)",
                self_.name, self_.id, transport_->name(), transport_reason_, fmt::join(others, ", "));
  }
}

}  // namespace braid::rpc
