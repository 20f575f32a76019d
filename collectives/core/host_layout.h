// HostLayout: which host each rank of a group runs on, for the two-level collectives (hier/) and for the
// factory's choice of engines (registry/engine_factory.h).
//
// A host is what the shared-memory engine calls one (shm/memory_pool.cc): the same kernel, told by the host
// name and the boot id. BRAID_EMULATED_HOST overrides that identity for this process: it is for tests and
// emulation only, e.g. 4 ranks under mpirun on one machine acting as 2 hosts x 2 ranks
// (`mpirun -np 2 env BRAID_EMULATED_HOST=a prog : -np 2 env BRAID_EMULATED_HOST=b prog`). Ranks with
// different identities then never share memory, whatever machine they are on.
//
// Hosts are numbered in the order of their lowest rank, and the ranks of a host (its local ranks) in
// rank order, so every rank derives the same layout from the same identities.
#pragma once

#include <string>
#include <vector>

#include "collectives/core/options.h"
#include "store/store.h"

namespace braid::collectives {

// "<host name>/<boot id>", or "emulated/<BRAID_EMULATED_HOST>" when that is set (and not empty).
std::string host_identity();

struct HostLayout {
  std::vector<int> host_of;                // group rank -> host index
  std::vector<int> local_rank_of;          // group rank -> its index among its host's ranks
  std::vector<std::vector<int>> hosts;     // host index -> its group ranks, ascending
  std::vector<std::string> names;          // host index -> identity (for messages)

  // From every rank's identity, in rank order.
  static HostLayout from_identities(const std::vector<std::string>& identities);
  // Collective over the group's ranks: each publishes host_identity() under `prefix` in `store` and reads
  // everyone's (a fresh generation of keys per call, so a later group of the same name reads no stale ones).
  static HostLayout exchange(store::Store& store, const std::string& prefix, int rank, int size, Millis timeout);

  int size() const { return static_cast<int>(host_of.size()); }
  int host_count() const { return static_cast<int>(hosts.size()); }
  int local_size(int host) const { return static_cast<int>(hosts[static_cast<size_t>(host)].size()); }
  int max_local_size() const;
  // More than one host, and some host with more than one rank: where two levels can help.
  bool two_levels() const { return host_count() > 1 && max_local_size() > 1; }
  // Every host has the same number of ranks.
  bool uniform() const;
  // The ranks (ascending by host) whose local rank is `local`: one per host that has that many ranks.
  std::vector<int> ranks_with_local_rank(int local) const;
  // "2 hosts: 0,1 | 2,3"
  std::string describe() const;
};

}  // namespace braid::collectives
