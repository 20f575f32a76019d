#include "collectives/registry/coalesced.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/check.h"
#include "base/deadline.h"
#include "tensor/factory.h"

namespace braid::collectives {

std::vector<std::vector<size_t>> coalesce_buckets(const TensorList& tensors, size_t buffer_size_bytes) {
  struct Open {
    std::vector<size_t> indices;
    size_t bytes = 0;
  };
  // Keyed by (dtype, device type, device index): only tensors of one kind share a flat buffer.
  std::map<std::tuple<int, int, int>, Open> open;
  std::vector<std::vector<size_t>> closed;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BRAID_CHECK_ARG(t.defined(), "broadcast_coalesced: tensor {} is undefined", i);
    BRAID_CHECK_ARG(!t.is_sparse(), "broadcast_coalesced: tensor {} is sparse; only dense tensors can be coalesced",
                    i);
    const auto key = std::make_tuple(static_cast<int>(t.dtype()), static_cast<int>(t.device().type),
                                     static_cast<int>(t.device().index));
    Open& bucket = open[key];
    bucket.indices.push_back(i);
    bucket.bytes += t.nbytes();
    if (bucket.bytes >= buffer_size_bytes) {
      closed.push_back(std::move(bucket.indices));
      open.erase(key);
    }
  }
  for (auto& [key, bucket] : open) closed.push_back(std::move(bucket.indices));
  // Issue order must not depend on map order or on when a bucket filled up, only on the list: every
  // rank sorts the same way, so the broadcasts match.
  std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return closed;
}

void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, size_t buffer_size_bytes, int root,
                         std::optional<Millis> timeout) {
  BRAID_CHECK_ARG(buffer_size_bytes > 0, "broadcast_coalesced on group '{}': buffer size must be positive",
                  group.name());
  BRAID_CHECK_ARG(root >= 0 && root < group.size(),
                  "broadcast_coalesced on group '{}': invalid root rank {} (group size {})", group.name(), root,
                  group.size());
  const auto deadline = Deadline::after(timeout.value_or(group.timeout()));

  struct InFlight {
    std::vector<size_t> indices;
    TensorList flat;  // one flat buffer; kept here so that it outlives the wait
    std::shared_ptr<Work> work;
  };
  std::vector<InFlight> in_flight;
  for (auto& indices : coalesce_buckets(tensors, buffer_size_bytes)) {
    const Tensor& first = tensors[indices.front()];
    int64_t total = 0;
    for (size_t i : indices) total += tensors[i].numel();
    Tensor flat = braid::empty({total}, TensorOptions(first.dtype(), first.device()));
    if (group.rank() == root) {
      int64_t offset = 0;
      for (size_t i : indices) {
        const Tensor& t = tensors[i];
        flat.narrow(0, offset, t.numel()).view(t.shape()).copy_(t);
        offset += t.numel();
      }
    }
    InFlight f{std::move(indices), {flat}, nullptr};
    BroadcastOptions options;
    options.root_rank = root;
    options.timeout = deadline.remaining();
    f.work = group.broadcast(f.flat, options);
    in_flight.push_back(std::move(f));
  }
  for (auto& f : in_flight) {
    f.work->wait(deadline.remaining());
    // The root's tensors already hold these values.
    if (group.rank() == root) continue;
    int64_t offset = 0;
    for (size_t i : f.indices) {
      const Tensor& t = tensors[i];
      t.copy_(f.flat[0].narrow(0, offset, t.numel()).view(t.shape()));
      offset += t.numel();
    }
  }
}

}  // namespace braid::collectives
