// The model registry: a process-wide table of definitions by name, the built-ins added when the table is
// first used (a function-local static, so a static library cannot drop them the way it drops unreferenced
// self-registering objects), ModelBuild's typed argument access and validate_model.
#include "runtime/models/model_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <new>
#include <shared_mutex>
#include <utility>

#include "base/check.h"
#include "base/oom_error.h"
#include "runtime/data/dataset_registry.h"
#include "runtime/models/builtin_models.h"
#include "runtime/models/comm_hook_registry.h"
#include "runtime/models/loss.h"
#include "runtime/models/named_registry.h"

namespace braid::runtime {

namespace {

using nlohmann::json;

struct Entry {
  ModelDefinition definition;
  std::function<void(const ModelBuild&)> check;  // built-ins only
  std::string origin;                            // "" built in; else the plugin's path
};

// " (plugin libmy_net.so)" for a plugin's model.
std::string marked(const std::string& origin) { return NamedRegistry<int>::marked(origin); }

struct Registry {
  Registry() {
    std::vector<detail::BuiltinModel> builtins = detail::basic_models();
    builtins.push_back(detail::sequential_model());
    builtins.push_back(detail::hybrid_model());
    for (detail::BuiltinModel& m : detail::fsdp_models()) builtins.push_back(std::move(m));
    for (detail::BuiltinModel& m : builtins) {
      std::string name = m.definition.name;
      entries.emplace(std::move(name), Entry{std::move(m.definition), std::move(m.check), {}});
    }
  }
  std::shared_mutex mu;
  // Entries are never removed, so pointers into the map stay valid after the lock is released.
  std::map<std::string, Entry> entries;  // GUARDED_BY(mu)
};

Registry& registry() {
  static Registry r;
  return r;
}

const Entry* find_entry(const std::string& name) {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  const auto it = r.entries.find(name);
  return it == r.entries.end() ? nullptr : &it->second;
}

// Edit distance counting an adjacent transposition as one edit ("optimal string alignment"), for the
// did-you-mean hints: "mpl" is one edit from "mlp".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string describe_json(const json& v) { return v.dump(); }

}  // namespace

// --- helpers shared with the built-ins

namespace detail {

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // Close enough to be a typo: at most a third of the longer word changed (and at least one edit allowed).
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    const size_t limit = std::max<size_t>(1, std::max(word.size(), c.size()) / 3);
    if (d <= limit && (best == nullptr || d < best_distance)) {
      best = &c;
      best_distance = d;
    }
  }
  return best == nullptr ? std::string() : fmt::format(" (did you mean '{}'?)", *best);
}

void check_known_keys(const json& object, const std::vector<std::string>& allowed, const std::string& where,
                      const std::string& what) {
  if (object.is_null()) return;
  BRAID_CHECK_ARG(object.is_object(), "{}: expected a mapping, got {}", where, describe_json(object));
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    BRAID_THROW(InvalidArgument, "{}.{}: unknown {}{}; accepted: {}", where, key, what, did_you_mean(key, allowed),
                allowed.empty() ? std::string("none") : fmt::format("{}", fmt::join(allowed, ", ")));
  }
}

KeyReader::KeyReader(const json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {
  BRAID_CHECK_ARG(object_.is_null() || object_.is_object(), "{}: expected a mapping, got {}", prefix_,
                  describe_json(object_));
}

const json* KeyReader::find(const std::string& key) const {
  if (!object_.is_object()) return nullptr;
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void KeyReader::missing(const std::string& key) const {
  BRAID_THROW(InvalidArgument, "{}: missing (this argument has no default)", where(key));
}

namespace {

// An integer, or a float with an integral value (YAML may write 4.0).
std::optional<int64_t> as_integer(const json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

}  // namespace

int64_t KeyReader::get_int(const std::string& key, std::optional<int64_t> fallback) const {
  const json* v = find(key);
  if (v == nullptr) {
    if (!fallback) missing(key);
    return *fallback;
  }
  const std::optional<int64_t> i = as_integer(*v);
  BRAID_CHECK_ARG(i.has_value(), "{}: expected an integer, got {}", where(key), describe_json(*v));
  return *i;
}

double KeyReader::get_double(const std::string& key, std::optional<double> fallback) const {
  const json* v = find(key);
  if (v == nullptr) {
    if (!fallback) missing(key);
    return *fallback;
  }
  BRAID_CHECK_ARG(v->is_number(), "{}: expected a number, got {}", where(key), describe_json(*v));
  return v->get<double>();
}

bool KeyReader::get_bool(const std::string& key, std::optional<bool> fallback) const {
  const json* v = find(key);
  if (v == nullptr) {
    if (!fallback) missing(key);
    return *fallback;
  }
  BRAID_CHECK_ARG(v->is_boolean(), "{}: expected true or false, got {}", where(key), describe_json(*v));
  return v->get<bool>();
}

std::string KeyReader::get_string(const std::string& key, std::optional<std::string> fallback) const {
  const json* v = find(key);
  if (v == nullptr) {
    if (!fallback) missing(key);
    return *fallback;
  }
  BRAID_CHECK_ARG(v->is_string(), "{}: expected a string, got {}", where(key), describe_json(*v));
  return v->get<std::string>();
}

std::vector<int64_t> KeyReader::get_ints(const std::string& key, std::optional<std::vector<int64_t>> fallback) const {
  const json* v = find(key);
  if (v == nullptr) {
    if (!fallback) missing(key);
    return *fallback;
  }
  BRAID_CHECK_ARG(v->is_array(), "{}: expected a list of integers, got {}", where(key), describe_json(*v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const std::optional<int64_t> x = as_integer((*v)[i]);
    BRAID_CHECK_ARG(x.has_value(), "{}[{}]: expected an integer, got {}", where(key), i, describe_json((*v)[i]));
    out.push_back(*x);
  }
  return out;
}

int64_t positive_arg(const ModelBuild& b, const std::string& key, std::optional<int64_t> fallback) {
  const int64_t v = b.arg_int(key, fallback);
  BRAID_CHECK_ARG(v > 0, "model.args.{}: must be positive, got {}", key, v);
  return v;
}

}  // namespace detail

// --- ModelBuild

int64_t ModelBuild::arg_int(const std::string& key, std::optional<int64_t> fallback) const {
  return detail::KeyReader(args, "model.args").get_int(key, fallback);
}
double ModelBuild::arg_double(const std::string& key, std::optional<double> fallback) const {
  return detail::KeyReader(args, "model.args").get_double(key, fallback);
}
bool ModelBuild::arg_bool(const std::string& key, std::optional<bool> fallback) const {
  return detail::KeyReader(args, "model.args").get_bool(key, fallback);
}
std::string ModelBuild::arg_string(const std::string& key, std::optional<std::string> fallback) const {
  return detail::KeyReader(args, "model.args").get_string(key, std::move(fallback));
}
std::vector<int64_t> ModelBuild::arg_ints(const std::string& key, std::optional<std::vector<int64_t>> fallback) const {
  return detail::KeyReader(args, "model.args").get_ints(key, std::move(fallback));
}

// --- the registry

void register_model(ModelDefinition definition, std::string origin) {
  const std::string from = origin.empty() ? std::string() : fmt::format(" (from plugin {})", origin);
  BRAID_CHECK_ARG(!definition.name.empty(), "register_model: the model name is empty{}", from);
  BRAID_CHECK_ARG(definition.build != nullptr, "register_model: model '{}'{} has no build function", definition.name,
                  from);
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  const std::string name = definition.name;
  const auto it = r.entries.find(name);
  BRAID_CHECK_ARG(it == r.entries.end(), "register_model: a model named '{}'{} is already registered{}", name, from,
                  it == r.entries.end() ? std::string()
                  : it->second.origin.empty() ? std::string(" (built in)")
                                              : fmt::format(" (by plugin {})", it->second.origin));
  r.entries.emplace(name, Entry{std::move(definition), nullptr, std::move(origin)});
}

std::string model_origin(const std::string& name) {
  const Entry* e = find_entry(name);
  return e == nullptr ? std::string() : e->origin;
}

std::shared_ptr<nn::Module> build_model(const std::string& kind, const ModelBuild& build, const std::string& where) {
  const ModelDefinition& def = get_model(kind);
  const std::string origin = model_origin(kind);
  std::shared_ptr<nn::Module> module;
  const auto who = [&] {
    return origin.empty() ? fmt::format("model '{}'", kind) : fmt::format("plugin {}: model '{}'", origin, kind);
  };
  try {
    module = def.build(build);
  } catch (const OutOfMemoryError& e) {
    // Not the job's syntax but its size: keep the type, and say which model and arguments asked for it.
    BRAID_THROW(OutOfMemoryError, "{} ran out of memory while building{} (model.args {}): {}", who(),
                where.empty() ? "" : " on " + where, build.args.dump(), e.what());
  } catch (const std::bad_alloc&) {
    BRAID_THROW(OutOfMemoryError, "{} ran out of memory while building{} (model.args {}): std::bad_alloc", who(),
                where.empty() ? "" : " on " + where, build.args.dump());
  } catch (const std::exception& e) {
    BRAID_THROW(InvalidArgument, "{} threw while building{}: {}", who(), where.empty() ? "" : " on " + where,
                e.what());
  }
  BRAID_CHECK_ARG(module != nullptr, "model.kind: '{}'{} built no module{}", kind, marked(origin),
                  where.empty() ? "" : " on " + where);
  return module;
}

const ModelDefinition* find_model(const std::string& name) {
  const Entry* e = find_entry(name);
  return e == nullptr ? nullptr : &e->definition;
}

const ModelDefinition& get_model(const std::string& name) {
  const ModelDefinition* d = find_model(name);
  if (d == nullptr) {
    const std::vector<std::string> names = model_names();
    std::vector<std::string> listed;
    for (const std::string& n : names) listed.push_back(n + marked(model_origin(n)));
    BRAID_THROW(InvalidArgument, "model.kind: unknown model '{}'{} (registered: {})", name,
                detail::did_you_mean(name, names), fmt::join(listed, ", "));
  }
  return *d;
}

std::vector<std::string> model_names() {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : r.entries) names.push_back(name);
  return names;  // std::map keeps them sorted
}

void validate_model(const ModelSpec& model, DdpMode ddp_mode, bool has_workers) {
  const ModelDefinition& def = get_model(model.kind);
  const Entry* entry = find_entry(model.kind);
  detail::check_known_keys(model.args, def.arg_names, "model.args", fmt::format("argument of model '{}'", def.name));
  const bool has_layers = !model.layers.is_null() && !(model.layers.is_array() && model.layers.empty());
  BRAID_CHECK_ARG(model.kind == "sequential" || !has_layers,
                  "model.layers: only model kind 'sequential' takes layers (this job's kind is '{}')", model.kind);
  if (ddp_mode == DdpMode::Inside) {
    BRAID_CHECK_ARG(def.supports_inside_ddp, "ddp.mode: 'inside' is not supported by model '{}' (it has no sub-module "
                    "to wrap); use 'outside' or 'none'", def.name);
  }
  static const json kEmptyObject = json::object();
  static const json kEmptyArray = json::array();
  const ModelBuild build{model.args.is_null() ? kEmptyObject : model.args,
                         model.layers.is_null() ? kEmptyArray : model.layers, model.init_seed, {}, nullptr};
  if (entry->check) entry->check(build);
  if (def.remote_parts) {
    const std::vector<RemotePart> parts = def.remote_parts(build.args);
    if (!parts.empty() && !has_workers) {
      std::vector<std::string> names;
      for (const RemotePart& p : parts) names.push_back(p.name);
      BRAID_THROW(InvalidArgument, "roles.workers: model '{}' places parts on workers ({}), but the job has no "
                  "workers", def.name, fmt::join(names, ", "));
    }
  }
}

void validate_job_model(const JobSpec& job) {
  try {
    validate_model(job.model, job.ddp.mode, !job.roles.workers.empty());
    std::error_code ec;
    BRAID_CHECK_ARG(job.model.init_from.empty() || std::filesystem::is_regular_file(job.model.init_from, ec),
                    "model.init_from: no such file: {}", job.model.init_from);
    if (job.loss == LossKind::Registered) check_loss_known(job.loss_name);
    if (job.data.kind == DataKind::Registered) validate_registered_dataset(job.data);
    validate_comm_hook(job.ddp);
  } catch (const InvalidArgument& e) {
    if (job.file.empty()) throw;
    BRAID_THROW(InvalidArgument, "{}: {}", job.file, e.what());
  }
}

}  // namespace braid::runtime
