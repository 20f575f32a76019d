#include "base/logging.h"
#include "base/quiet_timeouts.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <map>
#include <mutex>
#include <optional>
#include <unistd.h>
#include <vector>

#include "base/check.h"
#include "base/env.h"

namespace braid::logging {
namespace {

constexpr size_t kBacktraceLines = 64;

// A pattern flag (%R) that prints the process identity; reads the registry's current value.
class IdentityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<IdentityFlag>(); }
};

struct Registry {
  std::mutex mu;
  std::shared_ptr<spdlog::sinks::sink> sink;
  std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> loggers;
  spdlog::level::level_enum default_level = spdlog::level::info;
  std::map<std::string, spdlog::level::level_enum, std::less<>> overrides;
  // Guarded by identity_mu, not mu: the formatter reads it while spdlog holds its sink and backtrace
  // locks, and get() takes those locks (enable_backtrace) while holding mu; one mutex for both would be a
  // lock-order inversion.
  std::mutex identity_mu;
  std::string identity;
  bool env_read = false;

  Registry() {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<IdentityFlag>('R');
    formatter->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] [%R] %v");
    sink->set_formatter(std::move(formatter));
  }

  spdlog::level::level_enum level_for_locked(std::string_view name) const {
    auto it = overrides.find(name);
    return it == overrides.end() ? default_level : it->second;
  }
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked on purpose: loggers may be used during static destruction
  return *r;
}

void IdentityFlag::format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) {
  std::string id;
  {
    std::lock_guard<std::mutex> lock(registry().identity_mu);
    id = registry().identity.empty() ? std::string("pid ") + std::to_string(::getpid()) : registry().identity;
  }
  dest.append(id.data(), id.data() + id.size());
}

spdlog::level::level_enum parse_level(std::string_view text) {
  const std::string s(text);
  auto level = spdlog::level::from_str(s);
  // from_str maps unknown names to off; accept "off" only when asked for.
  BRAID_CHECK_ARG(level != spdlog::level::off || s == "off",
                  "log level: unknown level '{}' (use trace, debug, info, warn, error, critical or off)", s);
  return level;
}

struct LevelSpec {
  std::optional<spdlog::level::level_enum> default_level;
  std::map<std::string, spdlog::level::level_enum, std::less<>> overrides;
};

// "warn,braid.rpc=debug" -> default warn, braid.rpc at debug.
LevelSpec parse_spec(std::string_view spec) {
  LevelSpec out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    const std::string_view entry = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      out.default_level = parse_level(entry);
    } else {
      BRAID_CHECK_ARG(eq > 0, "log level: entry '{}' has no logger name before '='", entry);
      out.overrides[std::string(entry.substr(0, eq))] = parse_level(entry.substr(eq + 1));
    }
  }
  return out;
}

void apply_spec_locked(Registry& r, const LevelSpec& spec) {
  if (spec.default_level) r.default_level = *spec.default_level;
  for (const auto& [name, level] : spec.overrides) r.overrides[name] = level;
  for (auto& [name, logger] : r.loggers) logger->set_level(r.level_for_locked(name));
}

void read_env_locked(Registry& r);

}  // namespace

std::shared_ptr<spdlog::logger> get(std::string_view name) {
  init_from_env();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.loggers.find(name);
  if (it != r.loggers.end()) return it->second;
  auto logger = std::make_shared<spdlog::logger>(std::string(name), r.sink);
  logger->set_level(r.level_for_locked(name));
  logger->flush_on(spdlog::level::err);
  logger->enable_backtrace(kBacktraceLines);
  r.loggers.emplace(std::string(name), logger);
  return logger;
}

void set_identity(int rank, int world_size, std::string_view role) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.identity_mu);
  r.identity = "rank " + std::to_string(rank) + "/" + std::to_string(world_size);
  if (!role.empty()) r.identity += " " + std::string(role);
}

std::string identity() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.identity_mu);
  return r.identity;
}

void set_levels(std::string_view spec) {
  const LevelSpec parsed = parse_spec(spec);  // parse fully first: a bad spec changes nothing
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.env_read = true;  // an explicit spec wins over the environment
  apply_spec_locked(r, parsed);
}

void init_from_env() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.env_read) return;
  r.env_read = true;
  read_env_locked(r);
}

namespace {
thread_local int t_quiet_timeouts = 0;
}  // namespace

QuietTimeouts::QuietTimeouts() { ++t_quiet_timeouts; }
QuietTimeouts::~QuietTimeouts() { --t_quiet_timeouts; }
bool QuietTimeouts::active() { return t_quiet_timeouts > 0; }

void dump_backtrace() {
  if (QuietTimeouts::active()) return;
  std::vector<std::shared_ptr<spdlog::logger>> loggers;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    for (auto& [name, logger] : registry().loggers) loggers.push_back(logger);
  }
  for (auto& l : loggers) l->dump_backtrace();
}

namespace {
void read_env_locked(Registry& r) {
  auto spec = env::get("BRAID_LOG_LEVEL");
  if (!spec) spec = env::get("BRAID_LOG");
  if (!spec || spec->empty()) return;
  apply_spec_locked(r, parse_spec(*spec));
}
}  // namespace

}  // namespace braid::logging
