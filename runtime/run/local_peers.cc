#include "runtime/run/local_peers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "base/process_state.h"

namespace braid::runtime {

namespace {

double seconds(LocalPeers::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// "rank 1 (trainer) died (its process, pid 123, is gone<after>)" or "... has exited (pid 123<after>)" for a
// process that has ended; "" for any other state.
std::string ended_text(const std::string& who, long pid, ProcessState state, const std::string& after) {
  switch (state) {
    case ProcessState::kGone:
      return fmt::format("{} died (its process, pid {}, is gone{})", who, pid, after);
    case ProcessState::kExited:
      return fmt::format("{} has exited (pid {}{})", who, pid, after);
    default:
      return "";
  }
}

}  // namespace

std::string LocalPeers::this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

void LocalPeers::set(Table table, int self) {
  std::lock_guard<std::mutex> lock(mu_);
  table_ = std::move(table);
  self_ = self;
  host_ = this_host();
  stopped_.clear();
}

LocalPeers::Table LocalPeers::table() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_;
}

void LocalPeers::record_stop(int rank, Clock::time_point when) {
  std::lock_guard<std::mutex> lock(mu_);
  note_stopped(rank, when);
}

void LocalPeers::note_stopped(int rank, Clock::time_point now) {
  auto [it, inserted] = stopped_.try_emplace(rank, Sighting{now, now});
  if (!inserted) it->second.last = now;
}

std::string LocalPeers::describe(Filter filter, const NameRank& name, Clock::duration memory) {
  Table table;
  int self = -1;
  std::string host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    table = table_;
    self = self_;
    host = host_;
  }
  // The states are read without the lock: /proc may be slow on a loaded host.
  std::map<int, ProcessState> states;
  for (const auto& [r, where] : table) {
    const auto& [their_host, pid] = where;
    if (r == self || their_host != host || pid <= 0) continue;
    states[r] = process_state(static_cast<int>(pid));
  }
  const auto now = Clock::now();
  std::map<int, Sighting> seen;  // the stops still remembered, this look's included
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [r, state] : states) {
      if (state == ProcessState::kStopped) note_stopped(r, now);
    }
    for (const auto& [r, s] : stopped_) {
      if (now - s.last <= memory) seen.emplace(r, s);
    }
  }
  const auto stop_note = [&](int r) -> std::optional<std::string> {
    auto it = seen.find(r);
    if (it == seen.end()) return std::nullopt;
    return fmt::format("seen stopped for {:.1f} s, until {:.1f} s ago", seconds(it->second.last - it->second.first),
                       seconds(now - it->second.last));
  };
  // The peer that failed first cannot be told from one that a launcher's SIGTERM already ended, so every
  // one is named, the gone (reaped) ones first.
  std::vector<std::string> gone, ended;
  for (const auto& [r, state] : states) {
    const long pid = table.at(r).second;
    const std::optional<std::string> stop = stop_note(r);
    std::string stopped;
    if (state == ProcessState::kStopped) {
      stopped = fmt::format("{} is stopped (pid {})", name(r), pid);
    } else if (stop) {
      stopped = fmt::format("{} was stopped (pid {}): {}", name(r), pid, *stop);
    }
    if (filter == Filter::kStopped) {
      if (!stopped.empty()) ended.push_back(std::move(stopped));
      continue;
    }
    // A peer that ended after it was seen stopped: a launcher ended the hung rank; both are told.
    const std::string after = stop && filter == Filter::kFailed ? ", after it was " + *stop : "";
    if (std::string dead = ended_text(name(r), pid, state, after); !dead.empty()) {
      (state == ProcessState::kGone ? gone : ended).push_back(std::move(dead));
    } else if (filter == Filter::kFailed && !stopped.empty()) {
      ended.push_back(std::move(stopped));
    }
  }
  gone.insert(gone.end(), ended.begin(), ended.end());
  return fmt::format("{}", fmt::join(gone, "; "));
}

std::string LocalPeers::ended(int rank, const NameRank& name) {
  std::pair<std::string, long> where;
  std::string host;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(rank);
    if (it == table_.end() || rank == self_) return "";
    where = it->second;
    host = host_;
  }
  if (where.first != host || where.second <= 0) return "";
  const ProcessState state = process_state(static_cast<int>(where.second));
  if (state == ProcessState::kStopped) {
    std::lock_guard<std::mutex> lock(mu_);
    note_stopped(rank, Clock::now());
  }
  return ended_text(name(rank), where.second, state, "");
}

}  // namespace braid::runtime
