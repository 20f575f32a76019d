// The argument checks of each call, made on the calling thread before anything is queued or communicated
// (core/checks.h has the shared pieces and torch's message substrings). `engine` is the group's network
// engine: it says which devices and reductions it accepts.
#pragma once

#include "collectives/core/calls.h"
#include "collectives/core/checks.h"
#include "collectives/core/engine.h"

namespace braid::collectives::call_checks {

void check(const checks::Caller& c, const BroadcastCall& call, const Engine& engine);
void check(const checks::Caller& c, const AllreduceCall& call, const Engine& engine);
void check(const checks::Caller& c, const AllreduceCoalescedCall& call, const Engine& engine);
void check(const checks::Caller& c, const ReduceCall& call, const Engine& engine);
void check(const checks::Caller& c, const AllgatherCall& call, const Engine& engine);
void check(const checks::Caller& c, const AllgatherIntoTensorCall& call, const Engine& engine);
void check(const checks::Caller& c, const AllgatherCoalescedCall& call, const Engine& engine);
void check(const checks::Caller& c, const AllgatherIntoTensorCoalescedCall& call, const Engine& engine);
void check(const checks::Caller& c, const GatherCall& call, const Engine& engine);
void check(const checks::Caller& c, const ScatterCall& call, const Engine& engine);
void check(const checks::Caller& c, const ReduceScatterCall& call, const Engine& engine);
void check(const checks::Caller& c, const ReduceScatterTensorCall& call, const Engine& engine);
void check(const checks::Caller& c, const ReduceScatterTensorCoalescedCall& call, const Engine& engine);
void check(const checks::Caller& c, const AlltoallCall& call, const Engine& engine);
// Also works out every rank's element counts and offsets from the splits.
struct AlltoallCounts {
  std::vector<int64_t> send_counts, send_offsets, recv_counts, recv_offsets;
};
AlltoallCounts check(const checks::Caller& c, const AlltoallSingleCall& call, const Engine& engine);
// send, recv and recv_anysource.
void check_p2p(const checks::Caller& c, const TensorList& tensors, int peer, int tag, bool is_send, bool any_source,
               const Engine& engine);

}  // namespace braid::collectives::call_checks
