#include "dist_autograd/remote_device.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

#include "base/check.h"
#include "base/config.h"
#include "rpc/api.h"

namespace braid::dist_autograd {

namespace {

// PyTorch's _remote_device says "Could not parse remote_device: <s>. The valid format is
// '<workername>/<device>' or 'rank:<rank>/<device>' or '<device>'"; braid keeps the first part, adds why,
// and leaves out the device-only form (a RemoteModule needs a worker).
[[noreturn]] void fail(std::string_view text, std::string_view why) {
  BRAID_THROW(InvalidArgument,
              "Could not parse remote_device '{}': {}. The valid format is '<workername>/<device>' or "
              "'rank:<rank>/<device>', where '/<device>' is optional (default cpu) and <device> is {} (e.g. "
              "'worker0/cpu', 'worker0', 'rank:0/cpu')",
              text, why, BRAID_HAVE_CUDA ? "'cpu', 'cuda' or 'cuda:<index>'" : "'cpu' (this build has no CUDA)");
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

bool looks_like_device(std::string_view s) { return s == "cpu" || s == "cuda" || s.starts_with("cuda:"); }

Device parse_device(std::string_view text, std::string_view device) {
  if (device.empty()) fail(text, "the device after '/' is empty");
  if (device == "cpu") return Device::cpu();
  if (device == "cuda" || device.starts_with("cuda:")) {
    if (!BRAID_HAVE_CUDA) fail(text, fmt::format("device '{}' needs CUDA, and this build of braid has none", device));
    try {
      return Device::parse(device);
    } catch (const InvalidArgument& e) {
      fail(text, fmt::format("invalid device '{}' ({})", device, e.what()));
    }
  }
  fail(text, fmt::format("unknown device '{}'", device));
}

}  // namespace

RemoteDevice RemoteDevice::parse(std::string_view text) {
  RemoteDevice out;
  out.text_ = std::string(text);
  const std::vector<std::string_view> fields = split(text, '/');
  if (fields.size() > 2) fail(text, fmt::format("it has {} '/'-separated fields, at most 2 are allowed", fields.size()));
  const std::string_view worker = fields[0];
  if (fields.size() == 1 && looks_like_device(worker)) {
    fail(text, fmt::format("'{}' is a device alone and names no worker", worker));
  }
  if (worker.empty()) fail(text, "the worker name is empty");
  out.device_ = fields.size() == 2 ? parse_device(text, fields[1]) : Device::cpu();

  const std::vector<std::string_view> name_fields = split(worker, ':');
  if (name_fields.size() == 1) {
    out.worker_name_ = std::string(worker);
    return out;
  }
  if (name_fields.size() > 2 || name_fields[0] != "rank") {
    fail(text, fmt::format("worker part '{}' has a ':' but is not of the form 'rank:<rank>'", worker));
  }
  const std::string_view digits = name_fields[1];
  int rank = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  const bool all_digits = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (!all_digits || ec != std::errc() || end != digits.data() + digits.size()) {
    fail(text, fmt::format("the rank '{}' is not a non-negative integer", digits));
  }
  out.rank_ = rank;
  return out;
}

rpc::WorkerInfo RemoteDevice::worker() const {
  // get_worker_infos waits while this process's init_rpc is still publishing its agent: a peer's request
  // (a remote module built on this worker) can arrive in that window, and rpc::is_initialized() would
  // already say no (seen as a failed resume in e2e_run_resume's hybrid job).
  std::vector<rpc::WorkerInfo> workers;
  try {
    workers = rpc::get_worker_infos();
  } catch (const InvalidArgument& e) {
    BRAID_THROW(InvalidArgument, "remote_device '{}': {}", text_, e.what());
  }
  for (const auto& w : workers) {
    if (rank_ >= 0 ? w.id == rank_ : w.name == worker_name_) return w;
  }
  std::vector<std::string> known;
  for (const auto& w : workers) known.push_back(fmt::format("{} (rank {})", w.name, w.id));
  BRAID_THROW(InvalidArgument, "remote_device '{}': no worker {} in this RPC job (workers: {})", text_,
              rank_ >= 0 ? fmt::format("has rank {}", rank_) : fmt::format("is named '{}'", worker_name_),
              fmt::join(known, ", "));
}

}  // namespace braid::dist_autograd
