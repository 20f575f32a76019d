#include "store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/check.h"
#include "base/deadline.h"
#include "base/logging.h"

namespace braid::store {
namespace {

constexpr uint8_t kOpSet = 1;
constexpr uint8_t kOpDelete = 2;
constexpr const char* kRefCountKey = "__braid_filestore/refcount";
constexpr const char* kCleanupKey = "__braid_filestore/cleanup";

[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  BRAID_THROW(CommError, "FileStore {}: {} failed: {}", path, what, std::strerror(errno));
}

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

}  // namespace

// flock(2) for the duration of a scope; exclusive for writers.
class FileStore::Lock {
 public:
  Lock(int fd, bool exclusive, const std::string& path) : fd_(fd) {
    while (::flock(fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno != EINTR) throw_errno("flock", path);
    }
  }
  ~Lock() { ::flock(fd_, LOCK_UN); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  int fd_;
};

FileStore::FileStore(std::string path, int world_size, Millis timeout)
    : Store(timeout), path_(std::move(path)), world_size_(world_size) {
  BRAID_CHECK_ARG(!path_.empty(), "FileStore: empty path");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_errno("open", path_);
  if (world_size_ > 0) {
    std::lock_guard<std::mutex> guard(mu_);
    Lock lock(fd_, true, path_);
    add_locked(kRefCountKey, 1);
  }
}

FileStore::~FileStore() {
  if (fd_ < 0) return;
  try {
    if (world_size_ > 0) {
      std::lock_guard<std::mutex> guard(mu_);
      Lock lock(fd_, true, path_);
      const int64_t finished = add_locked(kCleanupKey, 1);
      const int64_t refs = add_locked(kRefCountKey, -1);
      if (finished >= world_size_ || refs == 0) ::unlink(path_.c_str());
    }
  } catch (const std::exception& e) {
    logging::get("braid.store")->warn("FileStore {}: clean-up failed: {}", path_, e.what());
  }
  ::close(fd_);
}

void FileStore::replay_locked() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw_errno("fstat", path_);
  if (st.st_size <= read_offset_) return;
  std::string buf(static_cast<size_t>(st.st_size - read_offset_), '\0');
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::pread(fd_, buf.data() + got, buf.size() - got, read_offset_ + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("read", path_);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  auto read_u32 = [&](uint32_t& v) {
    if (pos + 4 > got) return false;
    std::memcpy(&v, buf.data() + pos, 4);
    pos += 4;
    return true;
  };
  while (pos < got) {
    const size_t start = pos;
    const uint8_t op = static_cast<uint8_t>(buf[pos++]);
    uint32_t klen = 0, vlen = 0;
    if (!read_u32(klen) || pos + klen > got) { pos = start; break; }
    std::string key(buf.data() + pos, klen);
    pos += klen;
    if (!read_u32(vlen) || pos + vlen > got) { pos = start; break; }
    BRAID_CHECK_TYPED(CommError, op == kOpSet || op == kOpDelete,
                      "FileStore {}: corrupt record (op {}) at offset {}", path_, op, read_offset_ + start);
    if (op == kOpSet) data_[key] = Bytes(buf.begin() + pos, buf.begin() + pos + vlen);
    else data_.erase(key);
    pos += vlen;
  }
  read_offset_ += static_cast<int64_t>(pos);
}

void FileStore::append_locked(uint8_t op, const std::string& key, const Bytes& value) {
  std::string rec;
  rec.reserve(9 + key.size() + value.size());
  rec.push_back(static_cast<char>(op));
  put_u32(rec, static_cast<uint32_t>(key.size()));
  rec += key;
  put_u32(rec, static_cast<uint32_t>(value.size()));
  rec.append(value.begin(), value.end());
  // One write at the end of the file: records never interleave because writers hold LOCK_EX.
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) throw_errno("lseek", path_);
  size_t put = 0;
  while (put < rec.size()) {
    const ssize_t n = ::pwrite(fd_, rec.data() + put, rec.size() - put, end + static_cast<off_t>(put));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write", path_);
    put += static_cast<size_t>(n);
  }
  replay_locked();
}

int64_t FileStore::add_locked(const std::string& key, int64_t delta) {
  replay_locked();
  int64_t v = 0;
  auto it = data_.find(key);
  if (it != data_.end()) v = parse_counter(key, it->second);
  v += delta;
  append_locked(kOpSet, key, to_bytes(std::to_string(v)));
  return v;
}

void FileStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> guard(mu_);
  Lock lock(fd_, true, path_);
  append_locked(kOpSet, key, value);
}

Bytes FileStore::get(const std::string& key, Millis timeout) {
  wait({key}, timeout);
  std::lock_guard<std::mutex> guard(mu_);
  auto it = data_.find(key);
  BRAID_CHECK_ARG(it != data_.end(), "FileStore get: key '{}' was deleted while being read", key);
  return it->second;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> guard(mu_);
  Lock lock(fd_, true, path_);
  return add_locked(key, delta);
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> guard(mu_);
  Lock lock(fd_, true, path_);
  replay_locked();
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (!expected.empty()) return expected;
  } else if (it->second != expected) {
    return it->second;
  }
  append_locked(kOpSet, key, desired);
  return desired;
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  const Deadline deadline = Deadline::after(timeout);
  auto pause = std::chrono::microseconds(200);
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      Lock lock(fd_, false, path_);
      replay_locked();
      auto missing = missing_keys(data_, keys);
      if (missing.empty()) return;
      if (deadline.expired()) throw_wait_timeout("FileStore " + path_, keys, missing, timeout);
    }
    std::this_thread::sleep_for(std::min<std::chrono::microseconds>(pause, deadline.remaining()));
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> guard(mu_);
  Lock lock(fd_, false, path_);
  replay_locked();
  return missing_keys(data_, keys).empty();
}

bool FileStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> guard(mu_);
  Lock lock(fd_, true, path_);
  replay_locked();
  if (data_.find(key) == data_.end()) return false;
  append_locked(kOpDelete, key, {});
  return true;
}

int64_t FileStore::num_keys() {
  std::lock_guard<std::mutex> guard(mu_);
  Lock lock(fd_, false, path_);
  replay_locked();
  int64_t n = 0;
  for (const auto& [k, v] : data_) {
    if (!k.starts_with("__braid_filestore/")) ++n;
  }
  return n;
}

}  // namespace braid::store
