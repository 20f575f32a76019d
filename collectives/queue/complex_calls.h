// Complex tensors in the collectives, as torch.distributed treats them: a complex tensor is moved and
// summed as its real view (view_as_real: its parts as a trailing dim of 2), so lists that mix complex
// tensors with real ones of matching parts work (torch's test_tensor_dtype_complex), and AVG and
// PREMUL_SUM scale the parts. PRODUCT keeps complex elements whole for the engine to multiply (gloo and
// MPI can; NCCL refuses it at call time). MIN, MAX and the bitwise ops are refused: complex numbers
// have no order.
#pragma once

#include <functional>
#include <memory>

#include "collectives/core/calls.h"
#include "collectives/core/checks.h"

namespace braid::collectives::complex_calls {

// Whether any tensor of the call is complex.
bool any_complex(const Call& call);

// Refuses a reduction undefined on complex numbers ("allreduce does not support MAX on complex
// tensors"), then runs `issue` on a copy of the call whose complex tensors are real views (PRODUCT calls
// unchanged). The views share the caller's storage, so results land in the caller's tensors.
std::shared_ptr<Work> issue_with_real_views(const checks::Caller& caller, Call& call,
                                            const std::function<std::shared_ptr<Work>(Call&)>& issue);

}  // namespace braid::collectives::complex_calls
