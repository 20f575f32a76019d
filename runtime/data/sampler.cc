// DistributedSampler: PyTorch's torch.utils.data.DistributedSampler, with a portable shuffle and a
// choice of interleaved or contiguous shares.
#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "runtime/data/dataset.h"
#include "runtime/data/split_mix.h"

namespace braid::runtime {

namespace {

// The shuffle's streams, one per epoch; kept apart from the synthetic dataset's streams even when
// train.seed equals data.seed.
constexpr uint64_t kShuffleStreamBase = 0x5348554646ULL;  // "SHUFF"

// A uniformly random permutation of 0..n-1 drawn from (seed, epoch): Fisher-Yates from the top, which
// every trainer runs identically because the generator and the draws are fully specified.
std::vector<int64_t> shuffled(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  data::SplitMix64 gen(seed, kShuffleStreamBase + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(gen.uniform_below(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

// PyTorch's dealing of `list` to `replicas` trainers: padded with its own first elements (cycling) or cut
// (drop_last) to a multiple of replicas, then every replicas-th element (interleaved) or a block each.
std::vector<std::vector<int64_t>> deal(std::vector<int64_t> list, int replicas, Partition partition, bool drop_last) {
  const auto n = static_cast<int64_t>(list.size());
  const int64_t per = drop_last ? n / replicas : (n + replicas - 1) / replicas;
  const auto total = static_cast<size_t>(per * replicas);
  if (list.size() > total) {
    list.resize(total);
  } else if (!list.empty()) {
    for (size_t i = 0; list.size() < total; ++i) list.push_back(list[i]);
  }
  std::vector<std::vector<int64_t>> shares(static_cast<size_t>(replicas));
  for (int r = 0; r < replicas && per > 0; ++r) {
    auto& share = shares[static_cast<size_t>(r)];
    if (partition == Partition::Interleaved) {
      for (size_t i = static_cast<size_t>(r); i < total; i += static_cast<size_t>(replicas)) share.push_back(list[i]);
    } else {
      share.assign(list.begin() + r * per, list.begin() + (r + 1) * per);
    }
  }
  return shares;
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t size, int num_replicas, int rank, const DataSpec& spec,
                                       uint64_t seed)
    : size_(size),
      num_replicas_(num_replicas),
      rank_(rank),
      partition_(spec.partition),
      shuffle_(spec.shuffle),
      drop_last_(spec.drop_last),
      seed_(seed) {
  BRAID_CHECK_ARG(size >= 0, "DistributedSampler: dataset size {} is negative", size);
  BRAID_CHECK_ARG(num_replicas >= 1, "DistributedSampler: num_replicas (trainers) is {}, must be at least 1",
                  num_replicas);
  BRAID_CHECK_ARG(0 <= rank && rank < num_replicas,
                  "DistributedSampler: trainer index {} is not in [0, {}) for {} trainers", rank, num_replicas,
                  num_replicas);
  build();
}

void DistributedSampler::set_epoch(int64_t epoch) { set_epoch(epoch, {}, 1); }

void DistributedSampler::set_epoch(int64_t epoch, const std::vector<EpochSegment>& before, int batch_size) {
  BRAID_CHECK_ARG(epoch >= 0, "DistributedSampler::set_epoch: epoch {} is negative", epoch);
  BRAID_CHECK_ARG(batch_size >= 1, "DistributedSampler::set_epoch: batch size {} must be at least 1", batch_size);
  for (const EpochSegment& s : before) {
    BRAID_CHECK_ARG(s.trainers >= 1 && s.batches >= 0, "DistributedSampler::set_epoch: an earlier segment of {} "
                    "trainer(s) and {} batches", s.trainers, s.batches);
  }
  if (epoch == epoch_ && before == before_ && (before.empty() || batch_size == before_batch_size_)) return;
  epoch_ = epoch;
  before_ = before;
  before_batch_size_ = batch_size;
  build();
}

int64_t DistributedSampler::num_samples() const {
  // PyTorch: floor(size / R) with drop_last (the ragged tail goes), ceil(size / R) without (padding).
  return drop_last_ ? list_size_ / num_replicas_ : (list_size_ + num_replicas_ - 1) / num_replicas_;
}

void DistributedSampler::build() {
  std::vector<int64_t> all;
  if (shuffle_) {
    all = shuffled(size_, seed_, epoch_);
  } else {
    all.resize(static_cast<size_t>(size_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  for (const EpochSegment& seg : before_) {
    std::vector<int64_t> rest;
    const auto taken = static_cast<size_t>(seg.batches * before_batch_size_);
    for (const auto& share : deal(std::move(all), seg.trainers, partition_, drop_last_)) {
      if (share.size() > taken) rest.insert(rest.end(), share.begin() + static_cast<std::ptrdiff_t>(taken), share.end());
    }
    all = std::move(rest);
  }
  list_size_ = static_cast<int64_t>(all.size());
  indices_ = std::move(deal(std::move(all), num_replicas_, partition_, drop_last_)[static_cast<size_t>(rank_)]);
}

int64_t DistributedSampler::num_batches(int batch_size) const {
  BRAID_CHECK_ARG(batch_size >= 1, "DistributedSampler::num_batches: batch size {} must be at least 1", batch_size);
  const int64_t n = num_samples();
  return drop_last_ ? n / batch_size : (n + batch_size - 1) / batch_size;
}

std::vector<int64_t> DistributedSampler::batch_indices(int64_t b, int batch_size) const {
  const int64_t batches = num_batches(batch_size);
  BRAID_CHECK_ARG(0 <= b && b < batches,
                  "DistributedSampler::batch_indices: batch {} is not in [0, {}) (trainer {} of {}: {} samples "
                  "in batches of {})",
                  b, batches, rank_, num_replicas_, num_samples(), batch_size);
  const int64_t begin = b * batch_size;
  const int64_t end = std::min<int64_t>(begin + batch_size, num_samples());
  return {indices_.begin() + begin, indices_.begin() + end};
}

}  // namespace braid::runtime
