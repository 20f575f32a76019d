#include "runtime/launcher/line_prefixer.h"

#include "base/check.h"

namespace braid::runtime::launcher {

LinePrefixer::LinePrefixer(std::string prefix, size_t max_line_bytes)
    : prefix_(std::move(prefix)), max_line_bytes_(max_line_bytes) {
  BRAID_CHECK_ARG(max_line_bytes_ > 0, "LinePrefixer '{}': max_line_bytes must be positive", prefix_);
}

std::string LinePrefixer::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t start = 0;
  for (size_t nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n', start)) {
    out += prefix_;
    out.append(pending_, start, nl + 1 - start);
    start = nl + 1;
  }
  // What is left has no '\n'; cut it only when it outgrows the bound.
  while (pending_.size() - start >= max_line_bytes_) {
    out += prefix_;
    out.append(pending_, start, max_line_bytes_);
    out += '\n';
    start += max_line_bytes_;
  }
  pending_.erase(0, start);
  return out;
}

std::string LinePrefixer::finish() {
  if (pending_.empty()) return {};
  std::string out = prefix_ + pending_ + '\n';
  pending_.clear();
  return out;
}

}  // namespace braid::runtime::launcher
