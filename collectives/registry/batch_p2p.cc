#include "collectives/registry/batch_p2p.h"

#include <fmt/format.h>

#include "base/check.h"

namespace braid::collectives {

std::string to_string(P2PKind kind) { return kind == P2PKind::ISend ? "isend" : "irecv"; }

std::vector<std::shared_ptr<Work>> batch_isend_irecv(const std::vector<P2POp>& ops) {
  BRAID_CHECK_ARG(!ops.empty(), "batch_isend_irecv: Invalid ``p2p_op_list``: expected a non-empty list of P2POp");
  const GroupArg& group = ops.front().group;
  for (size_t i = 1; i < ops.size(); ++i) {
    const bool same = ops[i].group.has_value() == group.has_value() && (!group || *ops[i].group == *group);
    BRAID_CHECK_ARG(same,
                    "batch_isend_irecv: All ops need to use the same group: op {} ({} with peer {}) names another "
                    "group than op 0",
                    i, to_string(ops[i].op), ops[i].peer);
  }
  GroupPtr pg = group_for_op(group, "batch_isend_irecv");
  if (!pg) return {};
  // Every peer translated (and every tensor checked) before the first op is issued: a bad op sends nothing.
  std::vector<int> peers;
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    BRAID_CHECK_ARG(op.tensor.defined(), "batch_isend_irecv: op {} ({} with peer {}) has no tensor", i,
                    to_string(op.op), op.peer);
    try {
      peers.push_back(group ? get_group_rank(pg, op.peer) : op.peer);
    } catch (const InvalidArgument& e) {
      BRAID_THROW(InvalidArgument, "batch_isend_irecv: op {} ({} with peer {}) on group '{}': {}", i, to_string(op.op),
                  op.peer, pg->name(), e.what());
    }
    // The engine would refuse it too, but only after the ops before it were posted.
    BRAID_CHECK_ARG(op.tag == 0 || pg->backend_name() != "nccl",
                    "batch_isend_irecv: op {} ({} with peer {}): the nccl backend does not match messages by tag "
                    "(got tag {}); use tag 0",
                    i, to_string(op.op), op.peer, op.tag);
    const int p = peers.back();
    BRAID_CHECK_ARG(p >= 0 && p < pg->size() && p != pg->rank(),
                    "batch_isend_irecv: op {} ({} with peer {}): invalid peer rank on group '{}' of {} ranks (this is "
                    "rank {}, which cannot be its own peer)",
                    i, to_string(op.op), op.peer, pg->name(), pg->size(), pg->rank());
  }
  std::vector<std::shared_ptr<Work>> works;
  works.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    TensorList tensors{ops[i].tensor};
    works.push_back(ops[i].op == P2PKind::ISend ? pg->send(tensors, peers[i], ops[i].tag)
                                                : pg->recv(tensors, peers[i], ops[i].tag));
  }
  return works;
}

}  // namespace braid::collectives
