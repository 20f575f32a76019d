// batch_isend_irecv: torch.distributed's P2POp and batch_isend_irecv. A list of sends and receives, all on
// one group, is issued in list order and every Work is returned at once, so that pairs of ranks that both
// send and receive (a ring, a halo exchange) cannot wait on each other: posting a send or a receive
// never blocks on any engine (mpi and gloo post them; nccl gives every direction between two ranks its own
// channel, collectives/nccl/nccl_p2p.h).
//
// Peers are global ranks, as in torch, translated to ranks of the ops' group. Every op is checked before
// the first is issued: an empty list, ops on different groups, an undefined tensor or a peer outside the
// group is an InvalidArgument naming the op's index, and nothing is sent. Mismatched lists across ranks
// (a send without its receive, different sizes) fail in the engines as a lone send or receive does: the
// receive's size check names both sizes, a missing partner runs into the group's timeout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/registry/group_registry.h"

namespace braid::collectives {

// torch's dist.isend / dist.irecv as the op of a P2POp.
enum class P2PKind { ISend, IRecv };

struct P2POp {
  P2PKind op = P2PKind::ISend;
  Tensor tensor;
  int peer = -1;        // a global rank
  GroupArg group;       // unset: the default group
  int tag = 0;
};

std::string to_string(P2PKind kind);  // "isend", "irecv"

// Issues every op (torch's batch_isend_irecv); the Works are in the ops' order. A rank outside the ops'
// group gets no Works (after the warning group_for_op gives), as torch returns nothing there.
std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops);

}  // namespace braid::collectives
