// The Trainer of PyTorch's ddp_under_dist_autograd_test.py with its DDP modes (DdpMode): NONE (no DDP),
// INSIDE (fc2 wrapped in DDP over the trainers' group) and OUTSIDE (the whole hybrid model wrapped),
// optionally on uneven inputs under join.
// Registered as "da.DdpTrainer"; the trainers' process group is made by the test on every rank.
#pragma once

#include <memory>

#include "collectives/core/process_group.h"

namespace braid::mp {

enum class DdpMode { kNone = 0, kInside = 1, kOutside = 2 };

// The group of trainer ranks 0..3 that DDP reduces over (set by the test on every rank; null clears it).
void set_trainer_group(std::shared_ptr<collectives::ProcessGroup> group);
void register_ddp_trainer();

}  // namespace braid::mp
