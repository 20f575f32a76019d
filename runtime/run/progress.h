// What the driver reports while a job runs: one progress line per log.interval steps on stdout
// ("step 120/1000 epoch 2/5 loss 0.4312 1,234 samples/s ETA 3m12s"; on a terminal the line is rewritten in
// place), and one JSON object per step (and per evaluation) appended to log.metrics.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace braid::runtime {

std::string format_duration(double seconds);  // "3m12s", "45s", "1h02m"; under 10 s with a tenth: "1.5s"
std::string format_count(double value);        // "1,234" (rounded)

struct StepReport {
  int64_t step = 0;  // 1-based, steps done
  int64_t total_steps = 0;
  int64_t epoch = 0;  // 1-based
  int64_t total_epochs = 0;
  double loss = 0;
  int64_t samples = 0;  // this step, every trainer
  double samples_per_s = 0;
  double elapsed_s = 0;
};

class ProgressPrinter {
 public:
  // in_place: rewrite the line on a terminal. Off under mpirun, whose ranks write to a pseudo-terminal
  // that is not necessarily the user's (the output is often piped on from mpirun).
  explicit ProgressPrinter(std::FILE* out = stdout, bool in_place = true);
  void step(const StepReport& r);
  // Any other line (evaluation, summary): ends a pending in-place line first.
  void line(const std::string& text);

 private:
  std::FILE* out_;
  bool tty_;
  bool pending_ = false;  // an in-place line without its newline yet
};

class MetricsWriter {
 public:
  // Empty path: writes nothing. Appends (a resumed job continues the file).
  explicit MetricsWriter(const std::string& path);
  void write(const nlohmann::json& record);  // one line, flushed

 private:
  std::string path_;
  std::ofstream out_;
};

nlohmann::json step_record(const StepReport& r);  // {"step","epoch","loss","samples","samples_per_s","elapsed_s","time"}

}  // namespace braid::runtime
