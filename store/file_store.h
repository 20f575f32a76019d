// A Store in a file on a (shared) file system, for jobs whose processes share a path but not a network
// address (torch's FileStore, `file://` init methods).
//
// The file is an append-only log of set/delete records; every store object replays the records it has not
// seen yet. Writers hold an exclusive flock(2) while they read-modify-append, so add/compare_set are atomic
// across processes; readers poll with a short back-off until their keys appear or the timeout passes.
// With world_size > 0 the file is removed when world_size stores have been destroyed (or the last open
// store on it goes), as torch does.
#pragma once

#include <map>
#include <mutex>

#include "store/store.h"

namespace braid::store {

class FileStore final : public Store {
 public:
  // Opens (creating if needed) `path`. world_size <= 0 disables the clean-up on destruction.
  FileStore(std::string path, int world_size, Millis timeout = kDefaultStoreTimeout);
  ~FileStore() override;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  using Store::get;
  using Store::set;
  using Store::wait;

  const std::string& path() const { return path_; }

 private:
  class Lock;
  // Reads records appended since the last call into data_. Caller holds mu_ and a file lock.
  void replay_locked();
  void append_locked(uint8_t op, const std::string& key, const Bytes& value);
  int64_t add_locked(const std::string& key, int64_t delta);

  std::string path_;
  int world_size_;
  int fd_ = -1;
  std::mutex mu_;                       // serialises this object's users; the flock serialises processes
  std::map<std::string, Bytes> data_;   // GUARDED_BY(mu_)
  int64_t read_offset_ = 0;             // GUARDED_BY(mu_)
};

}  // namespace braid::store
