// The TransformerWithSharedParams of torch's common_fsdp.py: the runtime's model kind "transformer"
// (runtime/models/fsdp_models.h), which the FSDP tests use directly.
#pragma once

#include "runtime/models/fsdp_models.h"

namespace braid::mp {

using runtime::TiedOutputProjection;
using runtime::TransformerWithSharedParams;

}  // namespace braid::mp
