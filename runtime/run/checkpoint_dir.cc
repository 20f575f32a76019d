#include "runtime/run/checkpoint_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/check.h"
#include "base/fault_injection.h"
#include "base/logging.h"
#include "runtime/run/confined_path.h"

namespace braid::runtime {

namespace fs = std::filesystem;

namespace {

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  BRAID_CHECK_ARG(fd >= 0, "checkpoint: cannot open '{}' to sync it", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  BRAID_CHECK_ARG(rc == 0, "checkpoint: fsync of '{}' failed", path);
}

constexpr const char* kPrefix = "step-";
constexpr size_t kMaxLatestBytes = 256;  // "step-00000012\n" is 14

}  // namespace

std::string step_dir_name(int64_t step) { return fmt::format("{}{:08}", kPrefix, step); }

std::string rank_state_path(const std::string& step_dir, int rank) {
  return (fs::path(step_dir) / fmt::format("rank-{}.brsd", rank)).string();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    BRAID_CHECK_ARG(out.good(), "checkpoint: cannot write '{}'", tmp);
    out << text;
    out.flush();
    BRAID_CHECK_ARG(out.good(), "checkpoint: writing '{}' failed", tmp);
  }
  fsync_path(tmp, O_RDONLY);
  fs::rename(tmp, path);
  fsync_path(fs::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
}

std::string make_step_dir(const std::string& dir, int64_t step) {
  const fs::path p = fs::path(dir) / step_dir_name(step);
  fs::create_directories(p);
  return p.string();
}

void commit_checkpoint(const std::string& dir, const std::string& step_dir, const nlohmann::json& meta, int keep) {
  write_file_atomically((fs::path(step_dir) / "meta.json").string(), meta.dump(2) + "\n");
  fault::point("checkpoint");  // BRAID_FAULT: the driver's "checkpoint", between a step's files and `latest`
  write_file_atomically((fs::path(dir) / "latest").string(), fs::path(step_dir).filename().string() + "\n");
  // Keep the newest `keep` complete checkpoints; the names sort by step (zero-padded).
  std::vector<fs::path> complete;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind(kPrefix, 0) == 0 && fs::exists(e.path() / "meta.json")) complete.push_back(e.path());
  }
  std::sort(complete.begin(), complete.end());
  const size_t keep_n = static_cast<size_t>(std::max(keep, 1));
  for (size_t i = 0; i + keep_n < complete.size(); ++i) {
    std::error_code ec;
    fs::remove_all(complete[i], ec);
    if (ec) logging::get("braid.run")->warn("checkpoint: cannot remove old '{}': {}", complete[i].string(), ec.message());
  }
}

std::optional<CheckpointRef> read_latest(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(latest, ec);
  if (!fs::exists(st)) return std::nullopt;
  // braid writes `latest` as a small regular file; a link (to /dev/zero, or to a file whose first line the
  // errors below would quote) or anything else is refused, and at most a line's worth of it is read.
  BRAID_CHECK_ARG(fs::is_regular_file(st), "checkpoint: '{}' is not a regular file (a symbolic link or a device); "
                  "braid writes it as one", latest.string());
  std::ifstream in(latest);
  std::string name(kMaxLatestBytes, '\0');
  in.read(name.data(), static_cast<std::streamsize>(name.size()));
  name.resize(static_cast<size_t>(in.gcount()));
  name = name.substr(0, name.find('\n'));
  // commit_checkpoint writes a step directory's bare name; anything that leads elsewhere was not written
  // by braid, and following it would load (and export) whatever files it points at.
  BRAID_CHECK_ARG(!name.empty(), "checkpoint: '{}' is empty; it must name a step directory inside {}",
                  latest.string(), dir);
  BRAID_CHECK_ARG(!fs::path(name).is_absolute(), "checkpoint: '{}' names the absolute path '{}'; it must name a "
                  "step directory inside {}", latest.string(), name, dir);
  const fs::path step_dir = confine_path(name, dir, fmt::format("checkpoint: '{}'", latest.string()));
  const fs::path meta = step_dir / "meta.json";
  BRAID_CHECK_ARG(fs::exists(meta), "checkpoint: '{}' names '{}', which is not a complete checkpoint "
                  "(no {})", latest.string(), name, meta.string());
  return read_step_dir(step_dir.string());
}

CheckpointRef read_step_dir(const std::string& step_dir) {
  const fs::path meta = fs::path(step_dir) / "meta.json";
  std::ifstream m(meta);
  BRAID_CHECK_ARG(m.good(), "checkpoint: '{}' is not a complete checkpoint (no {})", step_dir, meta.string());
  std::stringstream text;
  text << m.rdbuf();
  CheckpointRef ref;
  ref.step_dir = fs::absolute(step_dir).string();
  try {
    ref.meta = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    BRAID_THROW(InvalidArgument, "checkpoint: '{}' is not valid JSON: {}", meta.string(), e.what());
  }
  return ref;
}

size_t shard_world(const nlohmann::json& fsdp, size_t trainers) {
  if (!fsdp.is_object() || !fsdp.value("enabled", false)) return 1;
  const std::string strategy = fsdp.value("sharding_strategy", "full_shard");
  if (strategy == "no_shard") return 1;
  if (strategy == "hybrid_shard") return static_cast<size_t>(std::max(1, fsdp.value("shard_group_size", 1)));
  return trainers;
}

std::vector<std::string> shard_group_files(const CheckpointRef& ref) {
  const std::string meta = (fs::path(ref.step_dir) / "meta.json").string();
  BRAID_CHECK_ARG(ref.meta.contains("roles") && ref.meta.at("roles").contains("trainers") && ref.meta.contains("job"),
                  "checkpoint: {} names no trainers or no job", meta);
  const auto trainers = ref.meta.at("roles").at("trainers").get<std::vector<int>>();
  BRAID_CHECK_ARG(!trainers.empty(), "checkpoint: {} names no trainers", meta);
  const nlohmann::json& job = ref.meta.at("job");
  const size_t n = std::min(shard_world(job.value("fsdp", nlohmann::json::object()), trainers.size()), trainers.size());
  std::vector<std::string> files;
  for (size_t t = 0; t < n; ++t) {
    files.push_back(rank_state_path(ref.step_dir, trainers[t]));
    std::error_code ec;
    BRAID_CHECK_ARG(fs::is_regular_file(files.back(), ec),
                    "checkpoint: {} is missing: it holds shard {} of {} of the model saved by trainer {} (rank {}), "
                    "and no other file has those rows", files.back(), t, n, t, trainers[t]);
  }
  return files;
}

}  // namespace braid::runtime
