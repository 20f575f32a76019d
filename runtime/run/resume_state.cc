#include "runtime/run/resume_state.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid::runtime {

namespace {

using Buckets = std::vector<std::vector<size_t>>;

Tensor encode_buckets(const Buckets& buckets) {
  std::vector<int64_t> flat{static_cast<int64_t>(buckets.size())};
  for (const auto& b : buckets) flat.push_back(static_cast<int64_t>(b.size()));
  for (const auto& b : buckets) {
    for (size_t i : b) flat.push_back(static_cast<int64_t>(i));
  }
  return from_vector(flat);
}

Buckets decode_buckets(const Tensor& t, const std::string& what) {
  BRAID_CHECK_ARG(t.defined() && t.dtype() == DType::Int64 && t.dim() == 1, "{}: expected a 1-D int64 tensor, got {}",
                  what, t.defined() ? t.describe() : std::string("an undefined tensor"));
  const std::vector<int64_t> flat = to_vector<int64_t>(t);
  BRAID_CHECK_ARG(!flat.empty() && flat[0] >= 0 && static_cast<size_t>(flat[0]) < flat.size(),
                  "{}: not a bucket layout ({} values)", what, flat.size());
  const auto count = static_cast<size_t>(flat[0]);
  Buckets out(count);
  size_t at = 1 + count;
  for (size_t b = 0; b < count; ++b) {
    const int64_t size = flat[1 + b];
    BRAID_CHECK_ARG(size > 0 && at + static_cast<size_t>(size) <= flat.size(), "{}: bucket {} of {} is cut short", what,
                    b, count);
    for (int64_t k = 0; k < size; ++k, ++at) {
      BRAID_CHECK_ARG(flat[at] >= 0, "{}: bucket {} names parameter {}", what, b, flat[at]);
      out[b].push_back(static_cast<size_t>(flat[at]));
    }
  }
  BRAID_CHECK_ARG(at == flat.size(), "{}: {} values after the last bucket", what, flat.size() - at);
  return out;
}

// "ddp.3.buckets" -> (3, "buckets"); "comm_hook.0.bucket.1.q" -> (0, "bucket.1.q").
std::pair<size_t, std::string> split_indexed(const std::string& key, size_t prefix_len, const std::string& path) {
  const size_t dot = key.find('.', prefix_len);
  BRAID_CHECK_ARG(dot != std::string::npos && dot > prefix_len, "{}: malformed entry '{}'", path, key);
  const int64_t index = env::parse_int(key.substr(prefix_len, dot - prefix_len), fmt::format("{}: entry '{}'", path, key));
  BRAID_CHECK_ARG(index >= 0, "{}: entry '{}' has a negative index", path, key);
  return {static_cast<size_t>(index), key.substr(dot + 1)};
}

}  // namespace

void append_resume_state(const ResumeParts& parts, nn::StateDict& out) {
  out.emplace_back("rng.default", bytes_tensor(default_generator().save_state()));
  for (size_t k = 0; k < parts.ddps.size(); ++k) {
    if (auto buckets = parts.ddps[k]->rebuilt_buckets()) out.emplace_back(fmt::format("ddp.{}.buckets", k), encode_buckets(*buckets));
  }
  for (size_t k = 0; k < parts.hooks.size(); ++k) {
    if (!parts.hooks[k].state_dict) continue;
    for (auto& [key, t] : parts.hooks[k].state_dict()) out.emplace_back(fmt::format("comm_hook.{}.{}", k, key), t);
  }
}

bool is_resume_state_key(const std::string& key) {
  return key == "rng.default" || key.rfind("ddp.", 0) == 0 || key.rfind("comm_hook.", 0) == 0;
}

void restore_resume_state(const ResumeParts& parts, const nn::StateDict& state, const std::string& path,
                          ResumeScope scope) {
  std::optional<std::string> rng;
  bool skipped_hooks = false;
  std::map<size_t, Buckets> buckets;
  std::map<size_t, parallel::CommHookState> hooks;
  for (const auto& [key, t] : state) {
    if (!is_resume_state_key(key)) continue;
    if (key == "rng.default" && !scope.generator) continue;
    if (key.rfind("comm_hook.", 0) == 0 && !scope.hooks) {
      skipped_hooks = true;
      continue;
    }
    if (key == "rng.default") {
      rng = tensor_bytes(t, fmt::format("{}: entry 'rng.default'", path));
    } else if (key.rfind("ddp.", 0) == 0) {
      const auto [k, field] = split_indexed(key, 4, path);
      BRAID_CHECK_ARG(field == "buckets", "{}: unexpected entry '{}'", path, key);
      BRAID_CHECK_ARG(k < parts.ddps.size(), "{}: entry '{}' is for DDP {}, but this job has {} (a checkpoint of another "
                      "job?)", path, key, k, parts.ddps.size());
      buckets[k] = decode_buckets(t, fmt::format("{}: entry '{}'", path, key));
    } else {
      const auto [k, field] = split_indexed(key, 10, path);
      BRAID_CHECK_ARG(k < parts.hooks.size() && parts.hooks[k].load_state_dict,
                      "{}: entry '{}' is the state of comm hook {}, but this job's {} (a checkpoint of another job?)",
                      path, key, k, k < parts.hooks.size() ? fmt::format("'{}' keeps none", parts.hooks[k].name)
                                                           : fmt::format("has {} hook(s)", parts.hooks.size()));
      hooks[k].emplace_back(field, t);
    }
  }
  if (skipped_hooks) {
    logging::get("braid.run")->warn("{}: the comm hook's state is per trainer and this job has another number of "
                                    "trainers: it starts afresh", path);
  }
  if (!rng && scope.generator) {
    logging::get("braid.run")->warn("{}: no generator state (a checkpoint from an older braid?): dropout masks after "
                                    "the resume will differ from an uninterrupted run's", path);
  } else if (rng) {
    Generator probe;
    try {
      probe.restore_state(*rng);
    } catch (const std::exception& e) {
      BRAID_THROW(InvalidArgument, "{}: entry 'rng.default': {}", path, e.what());
    }
  }
  for (size_t k = 0; k < parts.hooks.size(); ++k) {
    BRAID_CHECK_ARG(!scope.hooks || !parts.hooks[k].load_state_dict || hooks.count(k) > 0 || !rng,
                    "{}: comm hook {} ('{}') keeps state, but the checkpoint has none for it (saved with another "
                    "comm hook?)", path, k, parts.hooks[k].name);
  }
  for (auto& [k, b] : buckets) {
    try {
      parts.ddps[k]->restore_rebuilt_buckets(b);
    } catch (const std::exception& e) {
      BRAID_THROW(InvalidArgument, "{}: entry 'ddp.{}.buckets': {} (a checkpoint of another model?)", path, k, e.what());
    }
  }
  for (auto& [k, s] : hooks) {
    try {
      parts.hooks[k].load_state_dict(s);
    } catch (const std::exception& e) {
      BRAID_THROW(InvalidArgument, "{}: the state of comm hook {} ('{}'): {}", path, k, parts.hooks[k].name, e.what());
    }
  }
  if (rng) default_generator().restore_state(*rng);
}

}  // namespace braid::runtime
