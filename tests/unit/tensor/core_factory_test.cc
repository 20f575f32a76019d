// Factories, the seedable generators and the CPU caching allocator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "tensor/allocator.h"
#include "tensor/factory.h"
#include "tensor/random.h"

namespace braid {

TEST_CASE("allocator: round_size", "[core][allocator]") {
  CHECK(CpuAllocator::round_size(0) == 64);
  CHECK(CpuAllocator::round_size(1) == 64);
  CHECK(CpuAllocator::round_size(64) == 64);
  CHECK(CpuAllocator::round_size(65) == 128);
  CHECK(CpuAllocator::round_size(4096) == 4096);
  CHECK(CpuAllocator::round_size(4097) == 8192);
  CHECK(CpuAllocator::round_size(300000) == 524288);
  CHECK(CpuAllocator::round_size(size_t{1} << 20) == size_t{1} << 20);
  CHECK(CpuAllocator::round_size((size_t{1} << 20) + 1) == size_t{2} << 20);
  CHECK(CpuAllocator::round_size(size_t{5} << 20) == size_t{5} << 20);
}

TEST_CASE("allocator: a freed block is reused", "[core][allocator]") {
  CpuAllocator& a = CpuAllocator::instance();
  const size_t n = 3 * 1000 * 1000 + 17;  // rounds to 3 MiB
  const size_t rounded = CpuAllocator::round_size(n);
  void* p = a.allocate(n);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  const AllocatorStats s0 = a.stats();
  a.deallocate(p, n);
  const AllocatorStats s1 = a.stats();
  CHECK(s1.cached_bytes == s0.cached_bytes + rounded);
  CHECK(s1.allocated_bytes == s0.allocated_bytes - rounded);
  void* q = a.allocate(n - 5);  // same rounded size
  const AllocatorStats s2 = a.stats();
  CHECK(q == p);
  CHECK(s2.hits == s1.hits + 1);
  CHECK(s2.misses == s1.misses);
  CHECK(s2.cached_bytes == s1.cached_bytes - rounded);
  a.deallocate(q, n - 5);
  // Tensors go through the same cache.
  const uint64_t hits = a.stats().hits;
  { const Tensor t = Tensor::empty({static_cast<int64_t>(n / 4)}, DType::Float32); }
  CHECK(a.stats().hits > hits);
  // Zero-byte requests get distinct blocks; empty_cache releases every cached block.
  void* z1 = a.allocate(0);
  void* z2 = a.allocate(0);
  CHECK(z1 != nullptr);
  CHECK(z1 != z2);
  a.deallocate(z1, 0);
  a.deallocate(z2, 0);
  a.empty_cache();
  CHECK(a.stats().cached_bytes == 0);
  const uint64_t misses = a.stats().misses;
  void* r = a.allocate(n);
  CHECK(a.stats().misses == misses + 1);
  a.deallocate(r, n);
}

TEST_CASE("generator: seeding makes sequences deterministic", "[core][random]") {
  Generator g1(123), g2(123), g3(124);
  std::vector<uint64_t> a, b, c;
  for (int i = 0; i < 8; ++i) {
    a.push_back(g1.next_u64());
    b.push_back(g2.next_u64());
    c.push_back(g3.next_u64());
  }
  CHECK(a == b);
  CHECK(a != c);
  CHECK(g1.seed() == 123);
  g1.manual_seed(123);
  CHECK(g1.next_u64() == a[0]);
  g3.manual_seed(123);
  CHECK(g3.seed() == 123);
  CHECK(g3.next_u64() == a[0]);
  // Tensor factories with an explicit generator, and the default generator through manual_seed().
  Generator h1(9), h2(9);
  CHECK(to_vector<float>(rand({10}, {}, &h1)) == to_vector<float>(rand({10}, {}, &h2)));
  CHECK(to_vector<double>(randn({10}, DType::Float64, &h1)) == to_vector<double>(randn({10}, DType::Float64, &h2)));
  manual_seed(77);
  const auto x = to_vector<float>(rand({16}));
  const auto xi = to_vector<int64_t>(randint(0, 1000, {16}));
  manual_seed(77);
  CHECK(to_vector<float>(rand({16})) == x);
  CHECK(to_vector<int64_t>(randint(0, 1000, {16})) == xi);
  CHECK(default_generator().seed() == 77);
}

TEST_CASE("generator: a saved state replays the same draws", "[core][random]") {
  Generator g(5);
  g.next_u64();
  const Generator::State saved = g.get_state();
  const auto first = to_vector<float>(rand({8}, {}, &g));
  const uint64_t after = g.next_u64();
  g.set_state(saved);
  CHECK(to_vector<float>(rand({8}, {}, &g)) == first);
  CHECK(g.next_u64() == after);
  // Another generator takes the state over, seed included.
  Generator other(99);
  other.set_state(saved);
  CHECK(other.seed() == 5);
  CHECK(to_vector<float>(rand({8}, {}, &other)) == first);
}

TEST_CASE("generator: the state as bytes restores the same draws, and bad bytes change nothing", "[core][random]") {
  Generator g(11);
  g.next_u64();
  const std::string bytes = g.save_state();
  const uint64_t next = g.next_u64();
  Generator other(3);
  other.restore_state(bytes);
  CHECK(other.seed() == 11);
  CHECK(other.next_u64() == next);
  Generator kept(3);
  const uint64_t kept_next = Generator(3).next_u64();
  CHECK_THROWS_WITH(kept.restore_state("mt19937_64 1 2 3"), Catch::Contains("not a saved generator state"));
  CHECK_THROWS_WITH(kept.restore_state(bytes.substr(0, bytes.size() / 2)), Catch::Contains("not a saved generator"));
  CHECK_THROWS_AS(kept.restore_state(bytes + " trailing"), InvalidArgument);
  CHECK(kept.next_u64() == kept_next);
}

TEST_CASE("generator: distributions and bounds", "[core][random]") {
  Generator g(2024);
  const auto u = to_vector<double>(rand({20000}, DType::Float64, &g));
  CHECK(*std::min_element(u.begin(), u.end()) >= 0.0);
  CHECK(*std::max_element(u.begin(), u.end()) < 1.0);
  CHECK(std::accumulate(u.begin(), u.end(), 0.0) / u.size() == Approx(0.5).margin(0.01));
  const auto n = to_vector<double>(randn({100001}, DType::Float64, &g));  // odd count: the last of a pair
  const double mean = std::accumulate(n.begin(), n.end(), 0.0) / n.size();
  double var = 0;
  for (double v : n) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / (n.size() - 1));
  CHECK(mean == Approx(0.0).margin(0.02));
  CHECK(sd == Approx(1.0).margin(0.02));
  CHECK(std::all_of(n.begin(), n.end(), [](double v) { return std::isfinite(v); }));
  const auto r = to_vector<int64_t>(randint(-3, 4, {5000}, DType::Int64, &g));
  const std::set<int64_t> seen(r.begin(), r.end());
  CHECK(seen == std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3});
  const Tensor r8 = randint(0, 2, {100}, DType::Int8, &g);
  CHECK(r8.dtype() == DType::Int8);
  const auto big = to_vector<int64_t>(randint(INT64_MIN, INT64_MAX, {64}, DType::Int64, &g));
  CHECK(std::set<int64_t>(big.begin(), big.end()).size() == 64);
  CHECK_THROWS_WITH(randint(5, 5, {3}, DType::Int64, &g), Catch::Contains("from=5 >= to=5"));
  CHECK_THROWS_WITH(rand({3}, DType::Int32),
                    Catch::Contains("rand: expected a floating-point tensor, got dtype int32"));
  CHECK_THROWS_WITH(randn({3}, DType::Bool), Catch::Contains("randn: expected a floating-point tensor"));
  auto p = to_vector<int64_t>(randperm(50, &g));
  std::sort(p.begin(), p.end());
  std::vector<int64_t> iota(50);
  std::iota(iota.begin(), iota.end(), int64_t{0});
  CHECK(p == iota);
  CHECK(randperm(0).numel() == 0);
  CHECK_THROWS_WITH(randperm(-1), Catch::Contains("randperm: n must be non-negative"));
  CHECK(rand({2, 3}, DType::BFloat16).dtype() == DType::BFloat16);
}

TEST_CASE("factories: arange, eye, full, zeros, ones", "[core][factory]") {
  const Tensor a = arange(5);
  CHECK(a.dtype() == DType::Int64);
  CHECK(to_vector<int64_t>(a) == std::vector<int64_t>{0, 1, 2, 3, 4});
  const Tensor f = arange(0, 1, 0.25);
  CHECK(f.dtype() == DType::Float32);
  CHECK(to_vector<float>(f) == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(to_vector<int64_t>(arange(10, 0, -3)) == std::vector<int64_t>{10, 7, 4, 1});
  CHECK(arange(3, 3).numel() == 0);
  CHECK(arange(0, 5, 1, DType::Float64).dtype() == DType::Float64);
  CHECK(to_vector<int64_t>(arange(int64_t{1} << 60, (int64_t{1} << 60) + 2)) ==
        std::vector<int64_t>{int64_t{1} << 60, (int64_t{1} << 60) + 1});
  CHECK_THROWS_WITH(arange((int64_t{1} << 60) + 1, int64_t{1} << 60), Catch::Contains("inconsistent with step sign"));
  CHECK(arange(INT64_MAX - 2, INT64_MAX).numel() == 2);
  CHECK(arange(int64_t{0}, int64_t{-7}, int64_t{-3}).numel() == 3);
  CHECK_THROWS_WITH(arange(0, 5, 0), Catch::Contains("step must be nonzero"));
  CHECK_THROWS_WITH(arange(5, 0, 1), Catch::Contains("inconsistent with step sign"));
  CHECK(to_vector<float>(eye(2, 3)) == std::vector<float>{1, 0, 0, 0, 1, 0});
  CHECK(to_vector<int32_t>(eye(3, -1, DType::Int32)) == std::vector<int32_t>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  CHECK(eye(0).shape() == Shape{0, 0});
  CHECK_THROWS_WITH(eye(-1), Catch::Contains("eye: n must be greater or equal to 0"));
  const Tensor fu = full({2, 2}, 7, DType::Int32);
  CHECK(fu.dtype() == DType::Int32);
  CHECK(to_vector<int32_t>(fu) == std::vector<int32_t>{7, 7, 7, 7});
  CHECK(to_vector<float>(full({2}, 0.1)) == std::vector<float>{0.1f, 0.1f});
  CHECK(to_vector<bool>(full({2}, true, DType::Bool)) == std::vector<bool>{true, true});
  CHECK(zeros({2, 3}).dtype() == DType::Float32);
  CHECK(to_vector<double>(ones({3}, DType::Float16)) == std::vector<double>{1, 1, 1});
  const Tensor like = zeros_like(fu);
  CHECK(like.dtype() == DType::Int32);
  CHECK(like.shape() == Shape{2, 2});
  CHECK(to_vector<int32_t>(ones_like(fu)) == std::vector<int32_t>{1, 1, 1, 1});
  CHECK(to_vector<int32_t>(full_like(fu, -2)) == std::vector<int32_t>{-2, -2, -2, -2});
  CHECK(empty_like(fu).shape() == fu.shape());
  CHECK(scalar_tensor(4, DType::Int64).dim() == 0);
  CHECK(scalar_tensor(4, DType::Int64).item<int64_t>() == 4);
  // fill_ on a strided view only touches the view.
  const Tensor z = zeros({3, 4});
  z.slice(1, 0, 4, 2).fill_(5);
  CHECK(to_vector<float>(z.select(0, 2)) == std::vector<float>{5, 0, 5, 0});
}

TEST_CASE("factories: from_vector and to_vector", "[core][factory]") {
  const Tensor t = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.dtype() == DType::Int32);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(from_vector<double>({1, 2, 3}).shape() == Shape{3});
  CHECK(from_vector<double>({1}).dim() == 0);
  CHECK(from_vector<double>({}).shape() == Shape{0});
  CHECK_THROWS_WITH(from_vector<float>({1, 2, 3}, {2, 2}), Catch::Contains("3 values do not fill shape [2, 2]"));
  CHECK(to_vector<double>(t.t()) == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(to_vector<bool>(from_vector<int8_t>({0, -3, 1})) == std::vector<bool>{false, true, true});
  CHECK(to_vector<uint8_t>(from_vector<float>({1.9f, 200.f})) == std::vector<uint8_t>{1, 200});
  const auto h = to_vector<Half>(from_vector<double>({0.5, 2048}));
  CHECK(h[0].bits == 0x3800);
  CHECK(h[1].bits == 0x6800);
}

}  // namespace braid
