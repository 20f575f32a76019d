// Job files and texts → JobSpec: the size limit, the YAML tree, and the file and line that a JobError from
// the parser (job_parse.cc) is reported with.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "runtime/job/job_fields.h"
#include "runtime/job/job_parse.h"
#include "runtime/job/yaml_tree.h"

namespace braid::runtime {

JobSpec parse_job_text(const std::string& yaml, const std::string& origin, const std::string& base_dir) {
  const job_detail::YamlTree tree = job_detail::parse_yaml(yaml, origin);
  try {
    return job_detail::parse_tree(tree.value, origin, base_dir);
  } catch (const job_detail::JobError& e) {
    const int line = job_detail::line_of(tree.lines, e.key);
    std::string where = line > 0 ? fmt::format("{}:{}", origin, line) : origin;
    throw InvalidArgument(e.key.empty() ? fmt::format("{}: {}", where, e.what())
                                        : fmt::format("{}: {}: {}", where, e.key, e.what()));
  }
}

JobSpec parse_job_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InvalidArgument(fmt::format("{}: cannot read the job file: a directory", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InvalidArgument(
        fmt::format("{}: cannot read the job file: {}", path,
                    std::filesystem::exists(path, ec) ? "permission denied or not a file" : "no such file"));
  }
  // Read at most one byte past the limit: the file may be a pipe or /dev/zero, whose size says nothing.
  std::string text(job_detail::kMaxYamlBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > job_detail::kMaxYamlBytes) {
    throw InvalidArgument(fmt::format("{}: the job file is larger than the limit of {} bytes", path,
                                      job_detail::kMaxYamlBytes));
  }
  const std::filesystem::path dir = std::filesystem::absolute(std::filesystem::path(path)).parent_path();
  return parse_job_text(text, path, dir.string());
}

}  // namespace braid::runtime
