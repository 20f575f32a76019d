// Alltoall of ordinary CPU buffers through the group's staging blocks (staging_area.h), for groups
// whose ranks are all on one host: every rank copies its pieces for the others into its blocks once and
// copies the others' pieces for it out once (instead of gloo's pairwise exchange over TCP loopback, or, up
// to 1 MiB, Open MPI's transport).
//
// A block of chunk g holds a table (every rank's send and receive sizes, in bytes), then one slot per
// destination rank: slice k of the piece for that rank, where k counts the op's chunks from 0 and a slice
// is staged_alltoall_slot_bytes() long. Chunk g, in block g % 2 of every rank's segment:
//   1. wait until every rank is done with chunk g - 2, write the table (the op's first chunk only) and this
//      rank's slices in, publish data-in;
//   2. for every other rank, starting after this one, wait until its data is in and copy the slice it
//      holds for this rank into the output; publish done.
// The first chunk waits for every rank's table first. From all tables every rank reads the same verdicts:
// whether the largest input is within the staging's maximum (else every rank goes to the engine, which
// then also has the say on sizes that do not match, as between hosts), whether every send size matches
// its receiver's (else every rank fails alike), and how many chunks the largest piece needs (every rank
// runs as many, so that the lane's chunk count stays the same everywhere). A rank whose own input is over
// the maximum knows the first verdict already: its first chunk is its table alone, and it goes to the
// engine without waiting for the others'.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/core/engine.h"
#include "collectives/shm/staging_area.h"

namespace braid::collectives::shm {

// The pieces of one rank's alltoall, in elements of `element_bytes`, one count and offset per rank.
struct AlltoallPieces {
  const std::vector<int64_t>& send_counts;
  const std::vector<int64_t>& send_offsets;
  const std::vector<int64_t>& recv_counts;
  const std::vector<int64_t>& recv_offsets;
  int64_t element_bytes;
};

// The bytes of a piece that one chunk carries, on a group of `ranks` ranks (65,472 on 4 ranks).
int64_t staged_alltoall_slot_bytes(int ranks);
// Whether a group of `ranks` ranks has slots large enough for the staging to pay (false from 497 ranks up).
bool staged_alltoall_fits(int ranks);

// Runs the alltoall of `input` into `output` (both contiguous, CPU) on ctx.lane, which must be below
// staging.lanes(), and returns true; or returns false on every rank, having moved nothing, when some
// rank's input is larger than `max_bytes`: the engine's then. Throws TimeoutError naming the ranks that
// did not come by ctx.deadline, CommError when a rank it waits for has exited, and CommError when a rank
// sends another size than its receiver expects (naming both, in elements).
bool staged_alltoall(StagingArea& staging, const Tensor& input, Tensor& output, const AlltoallPieces& pieces,
                     int64_t max_bytes, const OpContext& ctx);

}  // namespace braid::collectives::shm
