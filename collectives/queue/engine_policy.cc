#include "collectives/queue/engine_policy.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/env.h"

namespace braid::collectives {

namespace {

int64_t size_setting(const std::optional<int64_t>& option, const char* variable, int64_t fallback) {
  if (option) return *option;
  const auto v = env::get(variable);
  return v ? env::parse_size(*v, variable) : fallback;
}

}  // namespace

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Allreduce: return "allreduce";
    case OpKind::AllreduceCoalesced: return "allreduce_coalesced";
    case OpKind::Reduce: return "reduce";
    case OpKind::Allgather: return "allgather";
    case OpKind::Gather: return "gather";
    case OpKind::Scatter: return "scatter";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::Alltoall: return "alltoall";
    case OpKind::Barrier: return "barrier";
  }
  return "unknown";
}

int64_t EnginePolicy::default_local_max_bytes(std::string_view network) {
  if (network == "gloo") return int64_t{1} << 40;
  if (network == "mpi") return int64_t{1} << 20;
  return 0;
}

EnginePolicy EnginePolicy::resolve(std::string_view network, const BackendOptions& options) {
  EnginePolicy p;
  if (options.shared_memory) {
    p.local_enabled = *options.shared_memory;
  } else if (const auto v = env::get("BRAID_SHM")) {
    BRAID_CHECK_ARG(*v == "0" || *v == "1", "BRAID_SHM must be 0 or 1, got '{}'", *v);
    p.local_enabled = *v == "1";
  }
  p.local_max_bytes = size_setting(options.shared_staging_max_bytes, "BRAID_SHM_STAGING_MAX_BYTES",
                                   default_local_max_bytes(network));
  p.pool_min_bytes = size_setting(options.shared_memory_min_bytes, "BRAID_SHM_ALLREDUCE_MIN_BYTES", 64 * 1024);
  p.pool_bytes = size_setting(std::nullopt, "BRAID_SHM_POOL_BYTES", int64_t{4} << 30);
  if (options.hierarchy) {
    p.hier_enabled = *options.hierarchy;
  } else if (const auto v = env::get("BRAID_HIERARCHY")) {
    BRAID_CHECK_ARG(*v == "0" || *v == "1", "BRAID_HIERARCHY must be 0 or 1, got '{}'", *v);
    p.hier_enabled = *v == "1";
  }
  p.hier_min_bytes = size_setting(options.hierarchy_min_bytes, "BRAID_HIERARCHY_MIN_BYTES", 0);
  BRAID_CHECK_ARG(p.hier_min_bytes >= 0, "process group '{}': the two-level collectives' minimum size must be "
                  ">= 0, got {}", options.group_name, p.hier_min_bytes);
  BRAID_CHECK_ARG(p.local_max_bytes >= 0, "process group '{}': the shared-memory staging's maximum size must be "
                  ">= 0, got {}", options.group_name, p.local_max_bytes);
  BRAID_CHECK_ARG(p.pool_min_bytes >= 0, "process group '{}': the shared-memory allreduce's minimum size must be "
                  ">= 0, got {}", options.group_name, p.pool_min_bytes);
  BRAID_CHECK_ARG(p.pool_bytes >= 0, "process group '{}': BRAID_SHM_POOL_BYTES must be >= 0, got {}",
                  options.group_name, p.pool_bytes);
  return p;
}

bool EnginePolicy::hier_first(const OpTraits& op, const Engine* hier, std::string* why) const {
  auto answer = [&](bool yes, const char* reason) {
    if (why != nullptr) *why = reason;
    return yes;
  };
  if (hier == nullptr) return answer(false, "no two-level engine");
  if (!hier_enabled) return answer(false, "two levels are off");
  if (!op.device.is_cpu()) return answer(false, "not on the CPU");
  switch (op.kind) {
    case OpKind::Allreduce:
    case OpKind::Broadcast:
    case OpKind::Allgather:
    case OpKind::ReduceScatter:
      if (op.bytes <= 0) return answer(false, "empty");
      return op.bytes >= hier_min_bytes ? answer(true, ">= hier_min_bytes") : answer(false, "below hier_min_bytes");
    case OpKind::AllreduceCoalesced:
    case OpKind::Reduce:
    case OpKind::Gather:
    case OpKind::Scatter:
    case OpKind::Alltoall:
    case OpKind::Barrier:
      return answer(false, "the two-level engine has no such op");
  }
  return answer(false, "unknown op");
}

bool EnginePolicy::local_first(const OpTraits& op, const Engine* local, std::string* why) const {
  // Every op asks: the reason is written only when someone reads it (the debug log).
  auto no = [&](const char* reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  auto yes = [&](const char* reason) {
    if (why != nullptr) *why = fmt::format("{} B {}", op.bytes, reason);
    return true;
  };
  if (local == nullptr) return no("no local engine");
  if (!local_enabled) return no("the local engine is off");
  if (!op.device.is_cpu()) return no("not on the CPU");
  const bool within = op.bytes > 0 && op.bytes <= local_max_bytes;
  const bool reducible = op.op == EngineOp::SUM && local->reduces(op.dtype);
  switch (op.kind) {
    case OpKind::Broadcast:
    case OpKind::Allgather:
      return within ? yes("<= local_max_bytes") : no("above local_max_bytes");
    case OpKind::Allreduce:
      if (!reducible) return no("the local engine reduces only float32/float64 SUM");
      if (pool_bytes > 0 && op.bytes >= pool_min_bytes) return yes(">= pool_min_bytes");
      return within ? yes("<= local_max_bytes") : no("above local_max_bytes");
    case OpKind::ReduceScatter:
      if (!reducible) return no("the local engine reduces only float32/float64 SUM");
      return within ? yes("<= local_max_bytes") : no("above local_max_bytes");
    case OpKind::Alltoall:
    case OpKind::Barrier:
      return local_max_bytes > 0 ? yes("(local_max_bytes > 0)") : no("local_max_bytes is 0");
    case OpKind::AllreduceCoalesced:
    case OpKind::Reduce:
    case OpKind::Gather:
    case OpKind::Scatter:
      return no("the local engine has no such op");
  }
  return no("unknown op");
}

std::string EnginePolicy::describe() const {
  return fmt::format("local engine {}, local_max_bytes={}, pool_min_bytes={}, pool_bytes={}, two levels {}, "
                     "hier_min_bytes={}", local_enabled ? "on" : "off", local_max_bytes, pool_min_bytes, pool_bytes,
                     hier_enabled ? "on" : "off", hier_min_bytes);
}

}  // namespace braid::collectives
