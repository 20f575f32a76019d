#include "nn/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "base/check.h"

namespace braid::nn::detail {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string op, bool direct) : path_(std::move(path)), op_(std::move(op)) {
  // pid + counter: concurrent saves to one path, from threads or processes, never share a temporary.
  static std::atomic<uint64_t> counter{0};
  tmp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  if (direct) {
    fd_ = ::open(tmp_.c_str(), flags | O_DIRECT, 0644);
    direct_ = fd_ >= 0;
    if (fd_ < 0 && errno != EINVAL) {
      BRAID_THROW(InvalidArgument, "{}('{}'): cannot create temporary file '{}': {}", op_, path_, tmp_, errno_text());
    }
  }
  if (fd_ < 0) fd_ = ::open(tmp_.c_str(), flags, 0644);  // a filesystem without O_DIRECT (tmpfs)
  BRAID_CHECK_ARG(fd_ >= 0, "{}('{}'): cannot create temporary file '{}': {}", op_, path_, tmp_, errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct_) {
      // The filesystem wants another alignment: the rest goes through the page cache.
      if (::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) == 0) {
        direct_ = false;
        continue;
      }
    }
    if (w < 0) BRAID_THROW(Error, "{}('{}'): writing '{}' failed: {}", op_, path_, tmp_, errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    BRAID_THROW(Error, "{}('{}'): cutting '{}' to {} bytes failed: {}", op_, path_, tmp_, size, errno_text());
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) BRAID_THROW(Error, "{}('{}'): fsync failed: {}", op_, path_, errno_text());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) BRAID_THROW(Error, "{}('{}'): close failed: {}", op_, path_, errno_text());
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    BRAID_THROW(Error, "{}('{}'): renaming '{}' into place failed: {}", op_, path_, tmp_, errno_text());
  }
  committed_ = true;
  // Make the rename itself durable. Best effort: some filesystems refuse to fsync a directory.
  const auto slash = path_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace braid::nn::detail
