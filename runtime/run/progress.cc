#include "runtime/run/progress.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "base/check.h"

namespace braid::runtime {

std::string format_duration(double seconds) {
  seconds = std::max(0.0, seconds);
  // Short jobs and the last ETAs of long ones: whole seconds would print "done: 460 steps in 2s".
  if (seconds < 9.95) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string format_count(double value) {
  const auto v = static_cast<int64_t>(std::llround(value));
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

ProgressPrinter::ProgressPrinter(std::FILE* out, bool in_place)
    : out_(out), tty_(in_place && ::isatty(::fileno(out)) != 0) {}

void ProgressPrinter::step(const StepReport& r) {
  const double remaining = r.samples_per_s > 0 && r.step > 0
                               ? r.elapsed_s / static_cast<double>(r.step) * static_cast<double>(r.total_steps - r.step)
                               : 0;
  const std::string text =
      fmt::format("step {}/{} epoch {}/{} loss {:.4f} {} samples/s ETA {}", r.step, r.total_steps, r.epoch,
                  r.total_epochs, r.loss, format_count(r.samples_per_s), format_duration(remaining));
  if (tty_) {
    fmt::print(out_, "\r\033[K{}", text);
    pending_ = true;
  } else {
    fmt::print(out_, "{}\n", text);
  }
  std::fflush(out_);
}

void ProgressPrinter::line(const std::string& text) {
  if (pending_) fmt::print(out_, "\n");
  pending_ = false;
  fmt::print(out_, "{}\n", text);
  std::fflush(out_);
}

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  BRAID_CHECK_ARG(out_.good(), "log.metrics: cannot open '{}' for appending", path);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (path_.empty()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  BRAID_CHECK_ARG(out_.good(), "log.metrics: writing '{}' failed", path_);
}

nlohmann::json step_record(const StepReport& r) {
  const auto now = std::chrono::system_clock::now();
  return nlohmann::json{{"step", r.step},
                        {"epoch", r.epoch},
                        {"loss", r.loss},
                        {"samples", r.samples},
                        {"samples_per_s", r.samples_per_s},
                        {"elapsed_s", r.elapsed_s},
                        {"time", fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(now)))}};
}

}  // namespace braid::runtime
