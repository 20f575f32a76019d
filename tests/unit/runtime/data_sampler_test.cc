// DistributedSampler (runtime/data/dataset.h) and its generator: PyTorch's padding, drop_last and
// partition rules worked out by hand for small sizes, shares that are disjoint and cover the data, per-epoch
// shuffles that every trainer agrees on, batches with a short last one, and permutations pinned to an
// independent transcription of the generator so that any change to the shuffle is caught.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "base/error.h"
#include "runtime/data/dataset.h"
#include "runtime/data/split_mix.h"

namespace braid::runtime {
namespace {

using Indices = std::vector<int64_t>;

DataSpec sampling(Partition partition, bool shuffle, bool drop_last) {
  DataSpec spec;
  spec.partition = partition;
  spec.shuffle = shuffle;
  spec.drop_last = drop_last;
  return spec;
}

// Every trainer's share for one epoch.
std::vector<Indices> shares(int64_t size, int replicas, const DataSpec& spec, uint64_t seed, int64_t epoch) {
  std::vector<Indices> out;
  for (int r = 0; r < replicas; ++r) {
    DistributedSampler s(size, replicas, r, spec, seed);
    s.set_epoch(epoch);
    out.push_back(s.indices());
  }
  return out;
}

Indices iota(int64_t n) {
  Indices v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// The permutation that shuffled `size` samples for `seed` and `epoch`: one trainer's share is all of it.
Indices permutation(int64_t size, uint64_t seed, int64_t epoch) {
  return shares(size, 1, sampling(Partition::Interleaved, true, false), seed, epoch).at(0);
}

TEST_CASE("SplitMix64 matches the published algorithm", "[runtime][data]") {
  // SplitMix64's well-known first outputs for state 1234567 (the state is advanced before mixing).
  constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;
  CHECK(data::mix64(1234567 + kGamma) == 6457827717110365317ULL);
  CHECK(data::mix64(1234567 + 2 * kGamma) == 3203168211198807973ULL);
  // A seeded stream, as computed by the Python transcription quoted in the next test.
  data::SplitMix64 gen(123, 5);
  CHECK(gen.next_u64() == 0x2bde56912f312b6eULL);
  CHECK(gen.next_u64() == 0xee68f31d7b729579ULL);
  CHECK(gen.next_u64() == 0x9ab092926b3265a9ULL);
}

TEST_CASE("DistributedSampler: the shuffle is pinned, so a changed generator is caught", "[runtime][data]") {
  // Expected values from an independent Python transcription of split_mix.h and sampler.cc:
  //   M = 2**64 - 1; G = 0x9E3779B97F4A7C15
  //   def mix(z): z = ((z ^ z >> 30) * 0xBF58476D1CE4E5B9) & M; z = ((z ^ z >> 27) * 0x94D049BB133111EB) & M
  //               return z ^ z >> 31
  //   state = mix(seed ^ mix((0x5348554646 + epoch + G) & M)); next: state = (state + G) & M; return mix(state)
  //   below(n): limit = M - M % n; draw until x < limit; x % n
  //   p = list(range(n)); for i in range(n - 1, 0, -1): j = below(i + 1); p[i], p[j] = p[j], p[i]
  CHECK(permutation(10, 0, 0) == Indices{1, 3, 2, 7, 4, 9, 6, 5, 8, 0});
  CHECK(permutation(10, 0, 1) == Indices{0, 9, 4, 1, 7, 3, 6, 8, 5, 2});
  CHECK(permutation(10, 42, 3) == Indices{6, 5, 7, 4, 3, 0, 1, 9, 2, 8});
  CHECK(permutation(16, 7, 0) == Indices{15, 8, 4, 13, 5, 6, 12, 9, 0, 7, 10, 2, 1, 14, 3, 11});
}

TEST_CASE("DistributedSampler: every trainer sees the same permutation, reshuffled every epoch", "[runtime][data]") {
  const int64_t n = 1000;
  const Indices e0 = permutation(n, 5, 0);
  Indices sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == iota(n));  // a permutation
  CHECK(e0 != iota(n));
  const Indices e1 = permutation(n, 5, 1);
  CHECK(e1 != e0);
  CHECK(permutation(n, 6, 0) != e0);  // the seed matters
  CHECK(permutation(n, 5, 0) == e0);  // and nothing else does

  // Trainers built separately interleave back into the very same permutation (1000 divides by 4).
  const DataSpec spec = sampling(Partition::Interleaved, true, false);
  for (const int64_t epoch : {0, 1, 7}) {
    const std::vector<Indices> parts = shares(n, 4, spec, 5, epoch);
    Indices rebuilt(static_cast<size_t>(n));
    for (size_t i = 0; i < rebuilt.size(); ++i) rebuilt[i] = parts[i % 4][i / 4];
    CHECK(rebuilt == permutation(n, 5, epoch));
  }

  // set_epoch back to an earlier epoch reproduces it (what --resume relies on).
  DistributedSampler s(n, 4, 2, spec, 5);
  const Indices first = s.indices();
  s.set_epoch(3);
  CHECK(s.epoch() == 3);
  CHECK(s.indices() != first);
  s.set_epoch(0);
  CHECK(s.indices() == first);
}

TEST_CASE("DistributedSampler: shares are disjoint, equal in length, and cover the data", "[runtime][data]") {
  for (const Partition partition : {Partition::Interleaved, Partition::Contiguous}) {
    for (const bool shuffle : {false, true}) {
      CAPTURE(partition == Partition::Contiguous, shuffle);
      const std::vector<Indices> parts = shares(103, 4, sampling(partition, shuffle, false), 11, 2);
      std::map<int64_t, int> count;
      for (const Indices& p : parts) {
        CHECK(p.size() == 26);  // ceil(103 / 4)
        for (const int64_t i : p) ++count[i];
      }
      CHECK(count.size() == 103);  // every sample
      int repeated = 0;
      for (const auto& [index, times] : count) repeated += times - 1;
      CHECK(repeated == 1);  // 104 - 103: only the padding repeats
      // The padding repeats the permutation's first element.
      const int64_t first = shuffle ? permutation(103, 11, 2).front() : 0;
      CHECK(count[first] == 2);
    }
  }
}

TEST_CASE("DistributedSampler: padding and partitions, worked out by hand", "[runtime][data]") {
  // 10 samples for 4 trainers: 0..9 padded with 0, 1 to 12.
  CHECK(shares(10, 4, sampling(Partition::Interleaved, false, false), 0, 0) ==
        std::vector<Indices>{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}});
  CHECK(shares(10, 4, sampling(Partition::Contiguous, false, false), 0, 0) ==
        std::vector<Indices>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 0, 1}});
  // Fewer samples than trainers: the padding cycles through the data, as PyTorch's does.
  CHECK(shares(2, 5, sampling(Partition::Interleaved, false, false), 0, 0) ==
        std::vector<Indices>{{0}, {1}, {0}, {1}, {0}});
  // A shuffled epoch pads with its own first elements.
  const Indices p = permutation(10, 3, 1);
  CHECK(shares(10, 4, sampling(Partition::Contiguous, true, false), 3, 1).at(3) == Indices{p[9], p[0], p[1]});
  // No data: every share is empty.
  CHECK(shares(0, 3, sampling(Partition::Interleaved, true, false), 0, 0) == std::vector<Indices>{{}, {}, {}});
}

TEST_CASE("DistributedSampler: drop_last drops the tail that does not divide", "[runtime][data]") {
  CHECK(shares(10, 4, sampling(Partition::Interleaved, false, true), 0, 0) ==
        std::vector<Indices>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(shares(10, 4, sampling(Partition::Contiguous, false, true), 0, 0) ==
        std::vector<Indices>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  // Shuffled: the shares are the permutation's first 8, disjoint.
  const Indices p = permutation(10, 9, 4);
  const std::vector<Indices> parts = shares(10, 4, sampling(Partition::Contiguous, true, true), 9, 4);
  Indices joined;
  for (const Indices& part : parts) joined.insert(joined.end(), part.begin(), part.end());
  CHECK(joined == Indices(p.begin(), p.begin() + 8));
  // Fewer samples than trainers: nothing is left (PyTorch gives num_samples 0 too).
  DistributedSampler few(3, 4, 0, sampling(Partition::Interleaved, false, true), 0);
  CHECK(few.num_samples() == 0);
  CHECK(few.num_batches(2) == 0);
}

TEST_CASE("DistributedSampler: batches keep a short last batch unless drop_last", "[runtime][data]") {
  DistributedSampler keep(10, 1, 0, sampling(Partition::Interleaved, false, false), 0);
  CHECK(keep.num_samples() == 10);
  CHECK(keep.num_batches(4) == 3);
  CHECK(keep.batch_indices(0, 4) == Indices{0, 1, 2, 3});
  CHECK(keep.batch_indices(2, 4) == Indices{8, 9});
  CHECK(keep.num_batches(5) == 2);
  CHECK(keep.num_batches(20) == 1);
  CHECK(keep.batch_indices(0, 20) == iota(10));

  DistributedSampler drop(10, 1, 0, sampling(Partition::Interleaved, false, true), 0);
  CHECK(drop.num_batches(4) == 2);
  CHECK(drop.batch_indices(1, 4) == Indices{4, 5, 6, 7});
  CHECK(drop.num_batches(20) == 0);

  // Trainer 1 of 3 over 20 samples: 7 each (one padded), batches of 3, 3 and 1.
  DistributedSampler r1(20, 3, 1, sampling(Partition::Interleaved, false, false), 0);
  CHECK(r1.indices() == Indices{1, 4, 7, 10, 13, 16, 19});
  CHECK(r1.num_batches(3) == 3);
  CHECK(r1.batch_indices(2, 3) == Indices{19});

  CHECK_THROWS_WITH(keep.batch_indices(3, 4), Catch::Contains("batch 3 is not in [0, 3)"));
  CHECK_THROWS_AS(keep.batch_indices(-1, 4), InvalidArgument);
  CHECK_THROWS_WITH(keep.num_batches(0), Catch::Contains("batch size 0"));
}

TEST_CASE("DistributedSampler: bad arguments name the values", "[runtime][data]") {
  const DataSpec spec;
  CHECK_THROWS_WITH(DistributedSampler(10, 4, 4, spec, 0), Catch::Contains("trainer index 4 is not in [0, 4)"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, -1, spec, 0), Catch::Contains("trainer index -1"));
  CHECK_THROWS_WITH(DistributedSampler(10, 0, 0, spec, 0), Catch::Contains("num_replicas (trainers) is 0"));
  CHECK_THROWS_WITH(DistributedSampler(-1, 1, 0, spec, 0), Catch::Contains("dataset size -1"));
  DistributedSampler s(10, 1, 0, spec, 0);
  CHECK_THROWS_AS(s.set_epoch(-1), InvalidArgument);
}

TEST_CASE("DistributedSampler: the rest of an epoch after segments on other trainer counts", "[runtime][data]") {
  // 240 samples in batches of 5: 3 steps on 4 trainers (60 samples), 2 on 2 (20 more), then 3 trainers.
  const std::vector<EpochSegment> before{{4, 3}, {2, 2}};
  for (const Partition partition : {Partition::Interleaved, Partition::Contiguous}) {
    CAPTURE(partition == Partition::Contiguous);
    const DataSpec spec = sampling(partition, true, false);
    std::map<int64_t, int> seen;
    // What the earlier segments took: each trainer's first batches.
    for (int r = 0; r < 4; ++r) {
      DistributedSampler s(240, 4, r, spec, 7);
      s.set_epoch(1);
      for (int64_t b = 0; b < 3; ++b) {
        for (const int64_t i : s.batch_indices(b, 5)) ++seen[i];
      }
    }
    for (int r = 0; r < 2; ++r) {
      DistributedSampler s(240, 2, r, spec, 7);
      s.set_epoch(1, {{4, 3}}, 5);
      CHECK(s.num_samples() == 90);  // (240 - 60) / 2
      for (int64_t b = 0; b < 2; ++b) {
        for (const int64_t i : s.batch_indices(b, 5)) ++seen[i];
      }
    }
    CHECK(seen.size() == 80);
    int64_t rest = 0;
    for (int r = 0; r < 3; ++r) {
      DistributedSampler s(240, 3, r, spec, 7);
      s.set_epoch(1, before, 5);
      CHECK(s.num_samples() == 54);  // ceil(160 / 3): 2 padded
      for (int64_t b = 0; b < s.num_batches(5); ++b) {
        for (const int64_t i : s.batch_indices(b, 5)) ++seen[i];
      }
      rest += s.num_samples();
    }
    CHECK(rest == 162);
    CHECK(seen.size() == 240);  // every sample of the epoch
    int repeated = 0;
    for (const auto& [index, times] : seen) repeated += times - 1;
    CHECK(repeated == 2);  // the padding of the last segment only
  }
  // No segment is the plain epoch; going back to it after segments rebuilds it.
  const DataSpec spec = sampling(Partition::Interleaved, true, false);
  DistributedSampler a(240, 3, 1, spec, 7), b(240, 3, 1, spec, 7);
  a.set_epoch(1);
  b.set_epoch(1, before, 5);
  CHECK(a.indices() != b.indices());
  b.set_epoch(1, {}, 5);
  CHECK(a.indices() == b.indices());
  CHECK_THROWS_WITH(b.set_epoch(1, {{0, 1}}, 5), Catch::Contains("an earlier segment of 0 trainer(s)"));
}

}  // namespace
}  // namespace braid::runtime
