// FlightRecorder and the process-wide dump (flight_recorder.h).
#include "collectives/queue/flight_recorder.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"

namespace braid::collectives {

namespace {

// How many watchdog findings a recorder keeps (a long job may stall, recover and stall again).
constexpr size_t kMaxStallNotes = 8;

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t steady_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// JSON string body: group names and reasons come from users.
std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

std::string_view to_string(TraceState s) {
  switch (s) {
    case TraceState::Scheduled: return "scheduled";
    case TraceState::Started: return "started";
    case TraceState::Completed: return "completed";
    case TraceState::Failed: return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(GroupShape shape, std::string backend, size_t capacity)
    : shape_(std::move(shape)), backend_(std::move(backend)), ring_(capacity) {}

TraceEntry* FlightRecorder::slot_locked(uint64_t seq) {
  if (ring_.empty()) return nullptr;
  TraceEntry& e = ring_[seq % ring_.size()];
  return e.seq == seq ? &e : nullptr;
}

void FlightRecorder::scheduled(uint64_t seq, const char* op, const TraceIo& io, Clock::time_point now) {
  if (ring_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  ring_[seq % ring_.size()] = TraceEntry{seq, op, io, TraceState::Scheduled, steady_ns(now), 0, 0};
  if (seq > last_seq_) last_seq_ = seq;
}

void FlightRecorder::started(uint64_t seq, Clock::time_point now) {
  if (ring_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (TraceEntry* e = slot_locked(seq)) {
    e->state = TraceState::Started;
    e->started_ns = steady_ns(now);
  }
}

void FlightRecorder::ended(uint64_t seq, bool ok) {
  if (ring_.empty()) return;
  const int64_t now = steady_ns(Clock::now());
  std::lock_guard<std::mutex> lock(mu_);
  if (TraceEntry* e = slot_locked(seq)) {
    e->state = ok ? TraceState::Completed : TraceState::Failed;
    e->ended_ns = now;
  }
}

void FlightRecorder::note_stall(StallNote note) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stalls_.size() == kMaxStallNotes) stalls_.erase(stalls_.begin());
  stalls_.push_back(std::move(note));
}

std::vector<TraceEntry> FlightRecorder::entries() const {
  std::vector<TraceEntry> out;
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.empty() || last_seq_ == 0) return out;
  const uint64_t n = std::min<uint64_t>(last_seq_, ring_.size());
  out.reserve(n);
  for (uint64_t seq = last_seq_ - n + 1; seq <= last_seq_; ++seq) {
    const TraceEntry& e = ring_[seq % ring_.size()];
    if (e.seq == seq) out.push_back(e);
  }
  return out;
}

std::string FlightRecorder::to_json() const {
  const std::vector<TraceEntry> es = entries();
  // Steady readings to wall-clock times, so that dumps of different ranks line up.
  const int64_t to_wall = wall_ns() - steady_ns(Clock::now());
  const auto wall = [to_wall](int64_t t) { return t == 0 ? int64_t{0} : t + to_wall; };
  std::vector<StallNote> stalls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stalls = stalls_;
  }
  std::string out = fmt::format(R"({{"name":"{}","rank":{},"size":{},"backend":"{}","capacity":{},"stalls":[)",
                                escape(shape_.name), shape_.rank, shape_.size, escape(backend_), ring_.size());
  for (size_t i = 0; i < stalls.size(); ++i) {
    const StallNote& s = stalls[i];
    std::string never, behind;
    for (size_t k = 0; k < s.never_joined.size(); ++k) never += fmt::format("{}{}", k ? "," : "", s.never_joined[k]);
    for (size_t k = 0; k < s.behind.size(); ++k) {
      behind += fmt::format(R"({}{{"rank":{},"last_seq":{}}})", k ? "," : "", s.behind[k].first, s.behind[k].second);
    }
    out += fmt::format(R"({}{{"seq":{},"op":"{}","waited_s":{:.3f},"never_joined":[{}],"behind":[{}],"unknown":"{}"}})",
                       i ? "," : "", s.seq, escape(s.op), s.waited_s, never, behind, escape(s.unknown));
  }
  out += R"(],"entries":[)";
  for (size_t i = 0; i < es.size(); ++i) {
    const TraceEntry& e = es[i];
    out += fmt::format(
        R"({}{{"seq":{},"op":"{}","state":"{}","in_numel":{},"out_numel":{},"dtype":"{}","scheduled_ns":{},"started_ns":{},"ended_ns":{}}})",
        i ? "," : "", e.seq, e.op, to_string(e.state), e.io.in_numel, e.io.out_numel, e.io.dtype, wall(e.scheduled_ns),
        wall(e.started_ns), wall(e.ended_ns));
    out += '\n';
  }
  out += "]}";
  return out;
}

// ---- The process-wide registry ----

namespace trace {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<FlightRecorder>> recorders;  // GUARDED_BY(mu)
  std::string default_dir;                               // GUARDED_BY(mu)
  int process_rank = -1;                                 // GUARDED_BY(mu): the rank in "world"
  bool handler_checked = false;                          // GUARDED_BY(mu)
  std::mutex dump_mu;                                    // one dump at a time (they write the same file)
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: a dump may run while statics go away
  return *r;
}

std::atomic<bool> g_signal_request{false};

// Only an atomic store: async-signal-safe. The groups' monitor threads do the dump.
void on_sigusr2(int) { g_signal_request.store(true, std::memory_order_relaxed); }

// SIGUSR2's default action kills the process; a program that set its own handler keeps it.
void install_handler_once_locked(Registry& r) {
  if (r.handler_checked) return;
  r.handler_checked = true;
  struct sigaction old {};
  if (::sigaction(SIGUSR2, nullptr, &old) != 0) return;
  if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigusr2;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  (void)::sigaction(SIGUSR2, &sa, nullptr);
}

std::string job_id() {
  for (const char* name : {"BRAID_JOB_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    if (auto v = env::get(name); v && !v->empty()) {
      std::string id;
      for (char c : *v) id += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
      return id;
    }
  }
  // No launcher id: one directory per user, so that users sharing a node do not write into each other's.
  return fmt::format("uid{}", ::getuid());
}

int rank_from_env() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (auto v = env::get(name); v && !v->empty()) {
      try {
        return static_cast<int>(env::parse_int(*v, name));
      } catch (const std::exception&) {
      }
    }
  }
  return -1;
}

}  // namespace

size_t buffer_size_from_env() {
  const int64_t n = env::get_int("BRAID_TRACE_BUFFER_SIZE", 2000);
  BRAID_CHECK_ARG(n >= 0 && n <= 10'000'000, "BRAID_TRACE_BUFFER_SIZE must be in [0, 10000000], got {}", n);
  return static_cast<size_t>(n);
}

void register_recorder(const std::shared_ptr<FlightRecorder>& recorder) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::erase_if(r.recorders, [](const std::weak_ptr<FlightRecorder>& w) { return w.expired(); });
  r.recorders.push_back(recorder);
  if (recorder->shape().name == "world" && r.process_rank < 0) r.process_rank = recorder->shape().rank;
  install_handler_once_locked(r);
}

void set_default_dir(std::string dir) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.default_dir = std::move(dir);
}

std::string dump_dir() {
  if (auto v = env::get("BRAID_TRACE_DIR"); v && !v->empty()) return *v;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.default_dir.empty()) return r.default_dir;
  }
  return fmt::format("/tmp/braid-trace-{}", job_id());
}

bool take_signal_request() { return g_signal_request.exchange(false, std::memory_order_relaxed); }

std::string dump_all(std::string_view reason) {
  Registry& r = registry();
  std::vector<std::shared_ptr<FlightRecorder>> live;
  int rank = -1;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& w : r.recorders) {
      if (auto s = w.lock(); s && s->capacity() > 0) live.push_back(std::move(s));
    }
    rank = r.process_rank;
  }
  if (live.empty()) return "";
  if (rank < 0) rank = rank_from_env();
  if (rank < 0) rank = live.front()->shape().rank;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string text = fmt::format(R"({{"format":"braid-trace","version":1,"rank":{},"pid":{},"host":"{}",)"
                                 R"("reason":"{}","time_ns":{},"groups":[)",
                                 rank, ::getpid(), escape(host), escape(reason), wall_ns());
  for (size_t i = 0; i < live.size(); ++i) {
    if (i) text += ",\n";
    text += live[i]->to_json();
  }
  text += "]}\n";
  std::lock_guard<std::mutex> dump_lock(r.dump_mu);
  const std::filesystem::path dir = dump_dir();
  const std::filesystem::path path = dir / fmt::format("rank-{}.json", rank);
  const std::filesystem::path tmp = dir / fmt::format(".rank-{}.json.{}.tmp", rank, ::getpid());
  try {
    std::filesystem::create_directories(dir);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      BRAID_CHECK_TYPED(Error, out.good(), "cannot create '{}'", tmp.string());
      out << text;
      out.flush();
      BRAID_CHECK_TYPED(Error, out.good(), "cannot write {} bytes to '{}'", text.size(), tmp.string());
    }
    std::filesystem::rename(tmp, path);
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    logging::get("braid.collectives")->error("flight recorder: could not dump ({}) to '{}': {}", reason,
                                             path.string(), e.what());
    return "";
  }
  logging::get("braid.collectives")->warn("flight recorder: dumped {} group(s) ({}) to {}", live.size(), reason,
                                          path.string());
  return path.string();
}

}  // namespace trace

}  // namespace braid::collectives
