// Object collectives: torch.distributed's broadcast_object_list, all_gather_object, gather_object,
// scatter_object_list, send_object_list and recv_object_list, for braid values (rpc::Value: none, bools,
// numbers, strings, lists, tuples, maps and tensors, nested).
//
// Nothing like pickle: each object travels as the typed bytes of rpc/value_bytes.h, which carry data only
// and are parsed on the checked path of an RPC message (every length against the bytes present and the
// limit before anything is allocated). A malformed payload is an InvalidArgument naming the op, the object
// and the rank that sent it; so is an announced size over `max_bytes`, refused before its buffer exists.
// RRefs cannot travel this way (they belong to an RPC agent).
//
// As in torch, each op runs two collectives on the group: the objects' sizes (int64), then their bytes
// (uint8, each padded to the largest where the op needs equal sizes). Ranks are global ranks, translated to
// the group's; every call blocks until its part is done. On an nccl group pass a CUDA `device` for the
// staging tensors (NCCL moves only CUDA memory); other groups stage on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/registry/group_registry.h"
#include "rpc/value.h"

namespace braid::collectives {

using rpc::Value;

struct ObjectOptions {
  // The most bytes of objects one call accepts from one rank (BRAID_OBJECT_MAX_BYTES, default 1 GiB).
  uint64_t max_bytes = 0;  // 0: the environment's, or the default
  Device device = Device::cpu();
};

// Every rank's `objects` becomes `src`'s (every rank passes a list of the same length).
void broadcast_object_list(std::vector<Value>& objects, int src = 0, const GroupArg& group = std::nullopt,
                           const ObjectOptions& options = {});
// objects[r] = rank r's `object`; `objects` must hold the group's size of entries (torch's [None] * ws).
void all_gather_object(std::vector<Value>& objects, const Value& object, const GroupArg& group = std::nullopt,
                       const ObjectOptions& options = {});
// On `dst`, (*gathered)[r] = rank r's `object` (gathered must hold the group's size of entries); others pass
// nullptr.
void gather_object(const Value& object, std::vector<Value>* gathered, int dst = 0,
                   const GroupArg& group = std::nullopt, const ObjectOptions& options = {});
// output[0] = src's inputs[group rank]; `output` holds at least one entry; only src passes `inputs` (the
// group's size of them).
void scatter_object_list(std::vector<Value>& output, const std::vector<Value>& inputs, int src = 0,
                         const GroupArg& group = std::nullopt, const ObjectOptions& options = {});
void send_object_list(const std::vector<Value>& objects, int dst, const GroupArg& group = std::nullopt,
                      const ObjectOptions& options = {});
// Fills `objects` (its length is the number expected) from `src` (-1: any rank); returns the sender's
// global rank.
int recv_object_list(std::vector<Value>& objects, int src = -1, const GroupArg& group = std::nullopt,
                     const ObjectOptions& options = {});

}  // namespace braid::collectives
