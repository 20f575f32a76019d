// The roles section: rank lists, "a-b" ranges or counts → explicit, disjoint rank lists; and the check of
// the roles against the launcher's world size.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <regex>
#include <set>

#include "base/error.h"
#include "runtime/job/job_fields.h"
#include "runtime/job/job_parse.h"

namespace braid::runtime {
namespace job_detail {
namespace {

using nlohmann::json;

constexpr int kMaxRank = 1 << 20;  // far beyond any job; keeps a typo like 1e9 from allocating a huge list

const char* kRanksHint = "a rank list ([0, 1, 2]), a range (\"0-3\") or, for every role, counts";

// Digits matched by append_range's pattern; a number past long's range is out of range too.
long parse_rank(const std::string& digits, const std::string& key) {
  long v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v >= kMaxRank) {
    fail(key, fmt::format("rank {} is out of range (at most {})", digits, kMaxRank - 1));
  }
  return v;
}

// "3" or "0-3" (inclusive) at `key`.
void append_range(const std::string& text, const std::string& key, std::vector<int>& out) {
  static const std::regex kRange{R"(\s*([0-9]+)\s*(-\s*([0-9]+)\s*)?)"};
  std::smatch m;
  if (!std::regex_match(text, m, kRange)) {
    fail(key, fmt::format("'{}' is not a rank or a range like \"0-3\"", text));
  }
  const long first = parse_rank(m[1].str(), key);
  const long last = m[3].matched ? parse_rank(m[3].str(), key) : first;
  if (last < first) fail(key, fmt::format("the range '{}' is empty (it must read low-high)", text));
  for (long r = first; r <= last; ++r) out.push_back(static_cast<int>(r));
}

std::vector<int> rank_list(const json& value, const std::string& key) {
  std::vector<int> out;
  if (value.is_string()) {
    append_range(value.get<std::string>(), key, out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string item = fmt::format("{}[{}]", key, i);
      const json& v = value[i];
      if (v.is_string()) {
        append_range(v.get<std::string>(), item, out);
        continue;
      }
      const int64_t r = as_integer(v, item);
      if (r < 0 || r >= kMaxRank) fail(item, fmt::format("rank {} is out of range (0..{})", r, kMaxRank - 1));
      out.push_back(static_cast<int>(r));
    }
  } else {
    fail(key, fmt::format("expected {}, got {}", kRanksHint, describe(value)));
  }
  return out;
}

// Counts: trainers first, then workers, then the master (the hybrid job's layout, as in torch's
// ddp_under_dist_autograd_test.py: trainers 0-3, worker 4, master 5).
RolesSpec from_counts(const Fields& f) {
  int trainers = 0;
  int workers = 0;
  f.read("trainers", trainers, 1, kMaxRank);
  if (f.has("workers") && !f.raw("workers").is_number()) {
    fail(f.path("workers"),
         fmt::format("roles.trainers is a count, so workers must be a count too, got {}", describe(f.raw("workers"))));
  }
  f.read("workers", workers, 0, kMaxRank);
  bool master = false;
  if (f.has("master")) {
    const json& m = f.raw("master");
    if (m.is_boolean()) {
      master = m.get<bool>();
    } else if (m.is_number_integer() && (m.get<int64_t>() == 0 || m.get<int64_t>() == 1)) {
      master = m.get<int64_t>() == 1;
    } else {
      fail(f.path("master"), fmt::format("roles.trainers is a count, so master is a count too (0, 1, true or "
                                         "false), got {}; give every role as ranks to place the master",
                                         describe(m)));
    }
  }
  RolesSpec roles;
  int next = 0;
  for (int i = 0; i < trainers; ++i) roles.trainers.push_back(next++);
  for (int i = 0; i < workers; ++i) roles.workers.push_back(next++);
  if (master) roles.master = next;
  return roles;
}

RolesSpec from_ranks(const Fields& f) {
  RolesSpec roles;
  roles.trainers = rank_list(f.raw("trainers"), f.path("trainers"));
  if (roles.trainers.empty()) fail(f.path("trainers"), "at least one trainer is required");
  if (f.has("workers")) {
    if (f.raw("workers").is_number()) {
      fail(f.path("workers"), fmt::format("roles.trainers is a rank list, so workers must be one too: write "
                                          "[{0}] for rank {0}, or give every role as a count",
                                          f.raw("workers").dump()));
    }
    roles.workers = rank_list(f.raw("workers"), f.path("workers"));
  }
  if (f.has("master")) {
    const int64_t m = as_integer(f.raw("master"), f.path("master"));
    if (m < 0 || m >= kMaxRank) fail(f.path("master"), fmt::format("rank {} is out of range (0..{})", m, kMaxRank - 1));
    roles.master = static_cast<int>(m);
  }
  return roles;
}

// Every rank has exactly one role, and the roles name ranks 0..N-1: any other set can never match a
// launcher's world, so it is reported here rather than at the start of a run.
void check_disjoint(const RolesSpec& roles) {
  std::map<int, std::string> owner;
  auto claim = [&](int rank, const std::string& role) {
    auto [it, fresh] = owner.emplace(rank, role);
    if (fresh) return;
    if (it->second == role) fail("roles." + role, fmt::format("rank {} is listed twice", rank));
    fail("roles." + role, fmt::format("rank {} is already a {}; every rank has exactly one role", rank,
                                      it->second == "trainers"  ? "trainer"
                                      : it->second == "workers" ? "worker"
                                                                : "master"));
  };
  for (int r : roles.trainers) claim(r, "trainers");
  for (int r : roles.workers) claim(r, "workers");
  if (roles.master) claim(*roles.master, "master");
  int expected = 0;
  for (const auto& [rank, role] : owner) {
    if (rank != expected) {
      fail("roles", fmt::format("rank {} has no role: the roles must name ranks 0..{} without gaps ({} ranks)",
                                expected, owner.size() - 1, owner.size()));
    }
    ++expected;
  }
}

}  // namespace

RolesSpec parse_roles(const json& value) {
  if (value.is_null()) {
    fail("roles",
         "required: which ranks train, e.g. {trainers: 4} or {trainers: [0, 1, 2, 3], workers: [4], master: 5}");
  }
  Fields f(value, "roles", {"trainers", "workers", "master"});
  if (!f.has("trainers")) fail("roles.trainers", fmt::format("required: at least one trainer, as {}", kRanksHint));
  RolesSpec roles = f.raw("trainers").is_number() ? from_counts(f) : from_ranks(f);
  check_disjoint(roles);
  return roles;
}

}  // namespace job_detail

int RolesSpec::world_size() const { return static_cast<int>(trainers.size() + workers.size()) + (master ? 1 : 0); }

void check_world_size(const JobSpec& job, int world_size) {
  const int named = job.roles.world_size();
  if (named == world_size) {
    // parse_job_* made the roles name 0..named-1 exactly; a job built in code gets the same check here.
    std::set<int> ranks(job.roles.trainers.begin(), job.roles.trainers.end());
    ranks.insert(job.roles.workers.begin(), job.roles.workers.end());
    if (job.roles.master) ranks.insert(*job.roles.master);
    if (static_cast<int>(ranks.size()) == world_size && *ranks.begin() == 0 && *ranks.rbegin() == world_size - 1) {
      return;
    }
    throw InvalidArgument(fmt::format("{}: roles: the roles must name ranks 0..{} once each (world size {})",
                                      job.file.empty() ? job.name : job.file, world_size - 1, world_size));
  }
  const std::string who = job.file.empty() ? job.name : job.file;
  throw InvalidArgument(fmt::format(
      "{}: roles: the job's roles name {} rank(s) ({} trainer(s), {} worker(s), {} master) but the launcher "
      "started {}; start it with -n {} (mpirun -np {}, srun -n {}, braid launch -n {})",
      who, named, job.roles.trainers.size(), job.roles.workers.size(), job.roles.master ? 1 : 0, world_size, named,
      named, named, named));
}

}  // namespace braid::runtime
