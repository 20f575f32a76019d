#include "base/fault_injection.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "base/check.h"

namespace braid::fault {

namespace {

struct Entry {
  std::string point;
  int signo = SIGKILL;
  int nth = 1;
};

std::atomic<bool> g_armed{false};
std::mutex g_mu;
std::vector<Entry> g_entries;        // GUARDED_BY(g_mu): this rank's entries only
std::map<std::string, int> g_reach;  // GUARDED_BY(g_mu): reaches per point so far
int g_rank = -1;                     // GUARDED_BY(g_mu)

int parse_signal(const std::string& s, const std::string& entry) {
  if (s == "kill" || s == "KILL" || s == "SIGKILL") return SIGKILL;
  if (s == "stop" || s == "STOP" || s == "SIGSTOP") return SIGSTOP;
  if (s == "term" || s == "TERM" || s == "SIGTERM") return SIGTERM;
  if (s == "abrt" || s == "ABRT" || s == "SIGABRT") return SIGABRT;
  char* end = nullptr;
  const long n = std::strtol(s.c_str(), &end, 10);
  BRAID_CHECK_ARG(!s.empty() && *end == 0 && n > 0 && n < NSIG,
                  "BRAID_FAULT entry '{}': signal '{}' is not kill, stop, term, abrt or a signal number", entry, s);
  return static_cast<int>(n);
}

int parse_int(const std::string& s, const std::string& entry, const char* what, int min) {
  char* end = nullptr;
  const long n = std::strtol(s.c_str(), &end, 10);
  BRAID_CHECK_ARG(!s.empty() && *end == 0 && n >= min && n <= 1'000'000, "BRAID_FAULT entry '{}': {} '{}' is not a "
                  "number >= {}", entry, what, s, min);
  return static_cast<int>(n);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

const char* signal_label(int signo) {
  switch (signo) {
    case SIGKILL: return "SIGKILL";
    case SIGSTOP: return "SIGSTOP";
    case SIGTERM: return "SIGTERM";
    case SIGABRT: return "SIGABRT";
    default: return "a signal";
  }
}

}  // namespace

void arm_from(const std::string& spec, int rank, int run) {
  std::vector<Entry> mine;
  if (!spec.empty()) {
    for (const std::string& entry : split(spec, ',')) {
      const std::vector<std::string> f = split(entry, ':');
      BRAID_CHECK_ARG(f.size() >= 3 && f.size() <= 5,
                      "BRAID_FAULT entry '{}': expected POINT:RANK:SIGNAL[:NTH[:RUN]]", entry);
      BRAID_CHECK_ARG(!f[0].empty(), "BRAID_FAULT entry '{}': the point is empty", entry);
      const int r = parse_int(f[1], entry, "rank", 0);
      Entry e{f[0], parse_signal(f[2], entry), f.size() >= 4 ? parse_int(f[3], entry, "reach", 1) : 1};
      const int entry_run = f.size() == 5 ? parse_int(f[4], entry, "run", 0) : 0;
      if (r == rank && entry_run == run) mine.push_back(std::move(e));
    }
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_entries = std::move(mine);
  g_reach.clear();
  g_rank = rank;
  g_armed.store(!g_entries.empty(), std::memory_order_release);
}

void arm(int rank, int run) {
  const char* spec = std::getenv("BRAID_FAULT");
  if (spec == nullptr || *spec == 0) return;
  arm_from(spec, rank, run);
}

bool armed() { return g_armed.load(std::memory_order_acquire); }

void point(std::string_view name) {
  if (!g_armed.load(std::memory_order_relaxed)) return;
  int signo = 0, reach = 0, rank = -1;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    bool named = false;
    for (const Entry& e : g_entries) named = named || e.point == name;
    if (!named) return;
    reach = ++g_reach[std::string(name)];
    for (const Entry& e : g_entries) {
      if (e.point == name && e.nth == reach) signo = e.signo;
    }
    rank = g_rank;
  }
  if (signo == 0) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = fmt::format("braid fault: rank {} raises {} at '{}' (reach {}) at unix time {:.3f}\n", rank,
                                       signal_label(signo), name, reach, now);
  // Unbuffered and whole: the process may die the next instant.
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  ::kill(::getpid(), signo);
}

}  // namespace braid::fault
