#include "collectives/shm/memory_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "base/logging.h"
#include "collectives/core/host_layout.h"
#include "collectives/shm/process_exited.h"
#include "tensor/allocator.h"

namespace braid::collectives::shm {
namespace {

constexpr size_t kControlBytes = MemoryPool::kControlBytes;
static_assert(sizeof(MemoryPool::ControlSlot) * MemoryPool::kMaxLanes <= kControlBytes);

// Ranks can share memory when they run under the same kernel and see the same /dev/shm; the first is
// checked through host_identity() (host name and boot id, or BRAID_EMULATED_HOST: core/host_layout.h), the
// second by trying to open the peers' segments.

// The PID namespace this process sees, e.g. "pid:[4026531836]": process ids are comparable only within one.
std::string pid_namespace() {
  char buf[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
}

std::string segment_name(int rank) {
  std::random_device rd;
  return fmt::format("/braid-pool-{}-{:08x}-r{}", getpid(), rd(), rank);
}

char* map_segment(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

// This rank's segment: created, sized (sparse) and mapped. {fd, mapping}, or {-1, null} with `why` set.
std::pair<int, char*> create_own(const std::string& name, size_t bytes, std::string& why) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    why = fmt::format("shm_open({}): {}", name, std::strerror(errno));
    return {-1, nullptr};
  }
  char* p = nullptr;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || (p = map_segment(fd, bytes)) == nullptr) {
    why = fmt::format("sizing or mapping {} ({} bytes): {}", name, bytes, std::strerror(errno));
    close(fd);
    shm_unlink(name.c_str());
    return {-1, nullptr};
  }
  return {fd, p};
}

char* open_peer(const std::string& name, size_t bytes, std::string& why) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    why = fmt::format("shm_open({}): {}", name, std::strerror(errno));
    return nullptr;
  }
  char* p = map_segment(fd, bytes);
  if (p == nullptr) why = fmt::format("mmap({}): {}", name, std::strerror(errno));
  close(fd);  // the mapping keeps the segment
  return p;
}

}  // namespace

std::shared_ptr<MemoryPool> MemoryPool::create(store::Store& store, const std::string& prefix, int rank,
                                                           int size, size_t reserve_bytes, Millis timeout) {
  // A generation per setup, so that a later pool of a group with the same name never reads stale keys.
  const int64_t gen = (store.add(prefix + "generation", 1) - 1) / size;
  const std::string base = fmt::format("{}{}/", prefix, gen);
  auto keys = [&](const char* what) {
    std::vector<std::string> k;
    for (int r = 0; r < size; ++r) k.push_back(fmt::format("{}{}/{}", base, what, r));
    return k;
  };

  const std::string me = host_identity();
  std::string why;
  // Undoes the setup on every way out but success, a store timeout included: nothing stays mapped or
  // named in /dev/shm.
  struct Setup {
    std::string name;
    size_t bytes;
    int fd = -1;
    std::vector<char*> segments;
    bool named = false;
    ~Setup() {
      if (named) shm_unlink(name.c_str());
      for (char* s : segments) {
        if (s != nullptr) munmap(s, bytes);
      }
      if (fd >= 0) close(fd);
    }
  } setup{segment_name(rank), reserve_bytes, -1, std::vector<char*>(size, nullptr)};
  char* own = nullptr;
  std::tie(setup.fd, own) = create_own(setup.name, reserve_bytes, why);
  setup.segments[rank] = own;
  setup.named = own != nullptr;
  // "<host>\n<segment name>\n<PID namespace> <pid>", or "-\n<why not>".
  const std::string my_process = fmt::format("{} {}", pid_namespace(), ::getpid());
  store.set(keys("segment")[rank],
            store::to_bytes(own != nullptr ? me + "\n" + setup.name + "\n" + my_process : "-\n" + why));

  bool ok = own != nullptr;
  std::vector<int> pids(static_cast<size_t>(size), 0);
  pids[static_cast<size_t>(rank)] = ::getpid();
  const auto published = store.multi_get(keys("segment"), timeout);
  for (int r = 0; r < size && ok; ++r) {
    if (r == rank) continue;
    const std::string v = store::to_string(published[r]);
    const auto nl = v.find('\n');
    const std::string host = v.substr(0, nl);
    std::string peer = v.substr(nl + 1);
    if (const auto nl2 = peer.find('\n'); host != "-" && nl2 != std::string::npos) {
      const std::string process = peer.substr(nl2 + 1);
      peer.resize(nl2);
      const auto space = process.rfind(' ');
      const std::string ns = process.substr(0, space == std::string::npos ? 0 : space);
      if (space != std::string::npos && ns != "?" && ns == pid_namespace()) {
        pids[static_cast<size_t>(r)] = std::atoi(process.c_str() + space + 1);
      }
    }
    if (host != me) {
      why = host == "-" ? fmt::format("rank {} has no segment ({})", r, peer) : fmt::format("rank {} is on another host", r);
      ok = false;
    } else if ((setup.segments[r] = open_peer(peer, reserve_bytes, why)) == nullptr) {
      ok = false;
    }
  }
  store.set(keys("mapped")[rank], store::to_bytes(ok ? "1" : "0"));
  bool all = true;
  for (const auto& v : store.multi_get(keys("mapped"), timeout)) all = all && store::to_string(v) == "1";
  // Every peer that could map this rank's segment has: the name can go.
  if (setup.named) shm_unlink(setup.name.c_str());
  setup.named = false;
  if (!all) {
    logging::get("braid.coll")->debug("shared-memory pool not set up on rank {}: {}", rank,
                                      ok ? "another rank could not share" : why);
    return nullptr;
  }
  auto pool = std::shared_ptr<MemoryPool>(
      new MemoryPool(rank, reserve_bytes, setup.fd, setup.segments, std::move(pids)));
  setup.fd = -1;
  setup.segments.clear();
  return pool;
}

MemoryPool::MemoryPool(int rank, size_t reserve_bytes, int own_fd, std::vector<char*> segments,
                                   std::vector<int> pids)
    : rank_(rank),
      reserve_(reserve_bytes),
      own_fd_(own_fd),
      segments_(std::move(segments)),
      pids_(std::move(pids)),
      next_(kControlBytes) {
  for (int lane = 0; lane < kMaxLanes; ++lane) new (&slot(rank_, lane)) ControlSlot();
}

MemoryPool::~MemoryPool() {
  for (char* s : segments_) munmap(s, reserve_);
  close(own_fd_);
}

bool MemoryPool::exited(int rank) const { return process_exited(pids_[static_cast<size_t>(rank)]); }

MemoryPool::ControlSlot& MemoryPool::slot(int rank, int lane) const {
  return reinterpret_cast<ControlSlot*>(segments_[rank])[lane];
}

size_t MemoryPool::block_size(size_t nbytes) {
  constexpr size_t kPage = 4096, kLarge = 64 * 1024;
  const size_t g = nbytes >= kLarge ? kLarge : kPage;
  return (std::max<size_t>(nbytes, 1) + g - 1) / g * g;
}

void* MemoryPool::allocate(size_t nbytes) {
  const size_t size = block_size(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_offsets_.find(size);
  if (it != free_offsets_.end() && !it->second.empty()) {
    const size_t off = it->second.back();
    it->second.pop_back();
    // Tensor memory like the CPU allocator's: its stats and peak count the blocks handed out.
    CpuAllocator::instance().note_external(static_cast<int64_t>(size));
    return segments_[rank_] + off;
  }
  if (next_ + size > reserve_) return nullptr;
  // Reserve the pages now: a full /dev/shm then fails here rather than with SIGBUS on first touch.
  if (fallocate(own_fd_, 0, static_cast<off_t>(next_), static_cast<off_t>(size)) != 0) return nullptr;
  const size_t off = next_;
  next_ += size;
  CpuAllocator::instance().note_external(static_cast<int64_t>(size));
  return segments_[rank_] + off;
}

void MemoryPool::deallocate(void* p, size_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  free_offsets_[block_size(nbytes)].push_back(static_cast<size_t>(static_cast<char*>(p) - segments_[rank_]));
  CpuAllocator::instance().note_external(-static_cast<int64_t>(block_size(nbytes)));
}

int64_t MemoryPool::offset_of(const void* p, size_t nbytes) const {
  const char* c = static_cast<const char*>(p);
  const char* seg = segments_[rank_];
  if (c < seg + kControlBytes || c + nbytes > seg + reserve_) return -1;
  std::lock_guard<std::mutex> lock(mu_);
  return c + nbytes <= seg + next_ ? c - seg : -1;
}

}  // namespace braid::collectives::shm
