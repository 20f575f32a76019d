// `braid trace analyze` (trace_analysis.h): reading the dumps, then one verdict per group.
#include "runtime/trace/trace_analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/check.h"

namespace braid::runtime {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Entry {
  uint64_t seq = 0;
  std::string op;
  std::string state;  // scheduled, started, completed, failed
  int64_t in_numel = 0;
  int64_t out_numel = 0;
  std::string dtype;
  int64_t started_ns = 0;
};

struct Stall {
  uint64_t seq = 0;
  std::vector<int> never_joined;
  std::map<int, uint64_t> behind;
};

// One rank's view of one group.
struct RankView {
  std::string file;
  std::string reason;
  int64_t time_ns = 0;
  int size = 0;
  std::string backend;
  std::map<uint64_t, Entry> entries;
  std::vector<Stall> stalls;

  // The newest op this rank started (0: none in its ring).
  uint64_t last_entered() const {
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      if (it->second.state != "scheduled") return it->first;
    }
    return 0;
  }
};

// group name -> group rank -> view
using Groups = std::map<std::string, std::map<int, RankView>>;

template <typename T>
T field(const json& obj, const char* key, const std::string& where) {
  BRAID_CHECK_ARG(obj.is_object() && obj.contains(key), "{}: '{}' is missing", where, key);
  try {
    return obj.at(key).get<T>();
  } catch (const json::exception&) {
    BRAID_THROW(InvalidArgument, "{}: '{}' has the wrong type ({})", where, key, obj.at(key).dump());
  }
}

// Reads one dump into `groups`; throws InvalidArgument naming the file and what is wrong with it.
void read_dump(const fs::path& path, Groups& groups) {
  const std::string file = path.filename().string();
  std::ifstream in(path, std::ios::binary);
  BRAID_CHECK_ARG(in.good(), "{}: cannot open", path.string());
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  BRAID_CHECK_ARG(!text.empty(), "{}: empty file (a dump cut short?)", file);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double's range
    BRAID_THROW(InvalidArgument, "{}: not valid JSON ({} bytes; a partial or corrupt dump?): {}", file, text.size(),
                e.what());
  }
  BRAID_CHECK_ARG(doc.is_object() && doc.value("format", "") == "braid-trace",
                  "{}: not a braid flight-recorder dump (no \"format\": \"braid-trace\")", file);
  const int version = field<int>(doc, "version", file);
  BRAID_CHECK_ARG(version == 1, "{}: dump version {} is not supported (this braid reads version 1)", file, version);
  const std::string reason = field<std::string>(doc, "reason", file);
  const auto time_ns = field<int64_t>(doc, "time_ns", file);
  const json& gs = doc.contains("groups") ? doc["groups"] : json();
  BRAID_CHECK_ARG(gs.is_array(), "{}: 'groups' is missing or not a list", file);
  for (size_t g = 0; g < gs.size(); ++g) {
    const std::string where = fmt::format("{}: groups[{}]", file, g);
    RankView v;
    v.file = file;
    v.reason = reason;
    v.time_ns = time_ns;
    const auto name = field<std::string>(gs[g], "name", where);
    const int rank = field<int>(gs[g], "rank", where);
    v.size = field<int>(gs[g], "size", where);
    v.backend = gs[g].value("backend", "?");
    BRAID_CHECK_ARG(v.size >= 1 && rank >= 0 && rank < v.size, "{}: rank {} is outside a group of size {}", where, rank,
                    v.size);
    const json& es = gs[g].contains("entries") ? gs[g]["entries"] : json();
    BRAID_CHECK_ARG(es.is_array(), "{}: 'entries' is missing or not a list", where);
    for (size_t i = 0; i < es.size(); ++i) {
      const std::string ew = fmt::format("{}.entries[{}]", where, i);
      Entry e;
      e.seq = field<uint64_t>(es[i], "seq", ew);
      e.op = field<std::string>(es[i], "op", ew);
      e.state = field<std::string>(es[i], "state", ew);
      BRAID_CHECK_ARG(e.state == "scheduled" || e.state == "started" || e.state == "completed" || e.state == "failed",
                      "{}: unknown state '{}'", ew, e.state);
      e.in_numel = es[i].value("in_numel", int64_t{0});
      e.out_numel = es[i].value("out_numel", int64_t{0});
      e.dtype = es[i].value("dtype", "?");
      e.started_ns = es[i].value("started_ns", int64_t{0});
      v.entries[e.seq] = std::move(e);
    }
    if (gs[g].contains("stalls") && gs[g]["stalls"].is_array()) {
      for (const json& s : gs[g]["stalls"]) {
        Stall st;
        st.seq = s.value("seq", uint64_t{0});
        if (s.contains("never_joined")) st.never_joined = s["never_joined"].get<std::vector<int>>();
        if (s.contains("behind")) {
          for (const json& b : s["behind"]) st.behind[b.value("rank", -1)] = b.value("last_seq", uint64_t{0});
        }
        v.stalls.push_back(std::move(st));
      }
    }
    auto& slot = groups[name];
    if (auto it = slot.find(rank); it != slot.end()) {
      BRAID_THROW(InvalidArgument, "{}: group '{}' rank {} also appears in {} (two dumps of one rank?)", where, name,
                  rank, it->second.file);
    }
    slot.emplace(rank, std::move(v));
  }
}

std::string ranks_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

// One group's verdict; appends to `out` and returns whether it is stuck.
bool analyze_group(const std::string& name, const std::map<int, RankView>& ranks, std::string& out) {
  int size = 0;
  std::string backend = "?";
  for (const auto& [r, v] : ranks) {
    size = std::max(size, v.size);
    backend = v.backend;
  }
  std::vector<int> no_dump;
  for (int r = 0; r < size; ++r) {
    if (!ranks.count(r)) no_dump.push_back(r);
  }
  // The stuck op: the oldest one some rank started and did not finish.
  std::optional<uint64_t> stuck;
  for (const auto& [r, v] : ranks) {
    for (const auto& [seq, e] : v.entries) {
      if (e.state == "started" && (!stuck || seq < *stuck)) stuck = seq;
    }
  }
  std::vector<std::string> failed;
  for (const auto& [r, v] : ranks) {
    for (const auto& [seq, e] : v.entries) {
      if (e.state == "failed") failed.push_back(fmt::format("rank {}: #{} {}", r, seq, e.op));
    }
  }
  std::string head = fmt::format("group '{}' ({} ranks, {}; dumps from {} of them)", name, size, backend, ranks.size());
  if (!stuck) {
    out += fmt::format("{}: no op in progress", head);
    uint64_t common = UINT64_MAX;
    for (const auto& [r, v] : ranks) common = std::min(common, v.last_entered());
    if (!ranks.empty() && common != UINT64_MAX) out += fmt::format(" (every dumped rank reached #{})", common);
    out += "\n";
    if (!failed.empty()) out += fmt::format("  failed ops: {}\n", fmt::join(failed, "; "));
    if (!no_dump.empty()) out += fmt::format("  no dump from {}\n", ranks_list(no_dump));
    return false;
  }
  const uint64_t S = *stuck;
  // What the op is, by the ranks that know it.
  std::map<std::string, std::vector<int>> names;
  const Entry* sample = nullptr;
  for (const auto& [r, v] : ranks) {
    if (auto it = v.entries.find(S); it != v.entries.end()) {
      names[it->second.op].push_back(r);
      if (!sample || it->second.state == "started") sample = &it->second;
    }
  }
  out += fmt::format("{}: HANG in #{} {} ({}, {} elements in, {} out)\n", head, S, sample->op, sample->dtype,
                     sample->in_numel, sample->out_numel);
  if (names.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [op, rs] : names) parts.push_back(fmt::format("{} on {}", op, ranks_list(rs)));
    out += fmt::format("  DESYNC: the ranks disagree on op #{}: {}\n", S, fmt::join(parts, "; "));
  }
  std::vector<std::string> inside, never, done;
  std::vector<int> never_ranks;
  for (const auto& [r, v] : ranks) {
    auto it = v.entries.find(S);
    const uint64_t last = v.last_entered();
    if (it != v.entries.end() && it->second.state == "started") {
      const double waited = it->second.started_ns > 0 ? static_cast<double>(v.time_ns - it->second.started_ns) / 1e9 : 0;
      inside.push_back(fmt::format("rank {} (for {:.1f} s when it dumped: {})", r, waited, v.reason));
    } else if (last < S) {
      std::string at = "none in its ring";
      if (last > 0) at = fmt::format("#{} {} {}", last, v.entries.at(last).op, v.entries.at(last).state);
      const bool queued = it != v.entries.end() && it->second.state == "scheduled";
      never.push_back(fmt::format("rank {} ({}last entered: {})", r, queued ? "issued it, not started; " : "", at));
      never_ranks.push_back(r);
    } else {
      done.push_back(fmt::format("rank {} (at #{})", r, last));
    }
  }
  // Ranks without a dump: what their peers' watchdogs read of their progress.
  std::vector<std::string> unknown;
  for (int r : no_dump) {
    std::optional<std::string> seen;
    for (const auto& [peer, v] : ranks) {
      for (const Stall& st : v.stalls) {
        if (st.seq != S) continue;
        if (std::find(st.never_joined.begin(), st.never_joined.end(), r) != st.never_joined.end()) {
          seen = "published no progress";
        } else if (auto b = st.behind.find(r); b != st.behind.end()) {
          seen = fmt::format("last seen waiting in #{}", b->second);
        }
      }
    }
    if (seen) {
      never.push_back(fmt::format("rank {} (no dump; its peers' stall watchdog: {})", r, *seen));
      never_ranks.push_back(r);
    } else {
      unknown.push_back(fmt::format("rank {}", r));
    }
  }
  if (!inside.empty()) out += fmt::format("  inside it, waiting: {}\n", fmt::join(inside, ", "));
  if (!never.empty()) out += fmt::format("  NEVER ENTERED it: {}\n", fmt::join(never, ", "));
  if (!done.empty()) out += fmt::format("  already past it: {}\n", fmt::join(done, ", "));
  if (!unknown.empty()) {
    out += fmt::format("  unknown (no dump, and no peer saw where it was; stopped, dead, or not dumped): {}\n",
                       fmt::join(unknown, ", "));
  }
  if (!failed.empty()) out += fmt::format("  failed ops: {}\n", fmt::join(failed, "; "));
  std::sort(never_ranks.begin(), never_ranks.end());
  if (!never_ranks.empty()) {
    out += fmt::format("  => {} never entered #{} {}: look there first.\n", ranks_list(never_ranks), S, sample->op);
  }
  return true;
}

}  // namespace

int TraceAnalysis::exit_code() const {
  if (hang) return 1;
  if (dumps_read == 0 || !problems.empty()) return 2;
  return 0;
}

TraceAnalysis analyze_trace_dir(const std::string& dir) {
  std::error_code ec;
  BRAID_CHECK_ARG(fs::is_directory(dir, ec), "trace analyze: '{}' is not a directory (dumps go to BRAID_TRACE_DIR, "
                  "else /tmp/braid-trace-<job id>)", dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && n.rfind("rank-", 0) == 0 && n.size() > 10 && n.substr(n.size() - 5) == ".json") {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  BRAID_CHECK_ARG(!files.empty(), "trace analyze: '{}' holds no dump (rank-<r>.json); nothing was dumped there yet", dir);
  TraceAnalysis a;
  Groups groups;
  for (const auto& f : files) {
    try {
      read_dump(f, groups);
      ++a.dumps_read;
    } catch (const std::exception& e) {
      a.problems.push_back(e.what());
    }
  }
  for (const auto& [name, ranks] : groups) {
    if (analyze_group(name, ranks, a.text)) a.hang = true;
    for (int r = 0; r < (ranks.empty() ? 0 : ranks.rbegin()->second.size); ++r) {
      if (!ranks.count(r)) a.problems.push_back(fmt::format("group '{}': no dump from rank {}", name, r));
    }
  }
  if (!a.problems.empty()) {
    a.text += fmt::format("incomplete: {}\n", a.problems.size());
    for (const auto& p : a.problems) a.text += fmt::format("  {}\n", p);
  }
  a.text += fmt::format("read {} of {} dump file(s) in {}: {}\n", a.dumps_read, files.size(), dir,
                        a.hang ? "a hang was found" : a.dumps_read ? "no hang found" : "nothing could be read");
  return a;
}

}  // namespace braid::runtime
