#include "security/job_secret.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "base/check.h"
#include "base/env.h"
#include "base/logging.h"

namespace braid::security {

namespace {

std::array<uint8_t, kKeyBytes> sha256(std::string_view data) {
  std::array<uint8_t, kKeyBytes> out{};
  unsigned int n = 0;
  BRAID_CHECK_TYPED(Error, EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) == 1 &&
                               n == kKeyBytes,
                    "job secret: SHA-256 failed in OpenSSL");
  return out;
}

std::string hex(const uint8_t* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}

struct ProcessSecret {
  std::mutex mu;
  std::optional<JobSecret> secret;
};

ProcessSecret& process_secret() {
  static ProcessSecret s;
  return s;
}

// Creates the per-user file without a window in which another process could read it half-written: the
// secret goes to a private temporary file that is then hard-linked into place; a process that loses the
// race reads the winner's file.
JobSecret load_or_create_user_secret() {
  const std::string path = user_secret_path();
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return JobSecret::from_file(path);
  const std::string dir = path.substr(0, path.rfind('/'));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    BRAID_THROW(Error, "job secret: cannot create '{}': {} (set BRAID_JOB_SECRET or BRAID_JOB_SECRET_FILE)", dir,
                std::strerror(errno));
  }
  const JobSecret fresh = JobSecret::generate();
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  BRAID_CHECK_TYPED(Error, fd >= 0, "job secret: cannot create a file in '{}': {}", dir, std::strerror(errno));
  const std::string line = fresh.text() + "\n";
  const bool written = ::fchmod(fd, 0600) == 0 &&
                       ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    BRAID_THROW(Error, "job secret: cannot write '{}': {}", tmp, std::strerror(write_errno));
  }
  const bool linked = ::link(tmp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!linked && link_errno != EEXIST) {
    BRAID_THROW(Error, "job secret: cannot create '{}': {}", path, std::strerror(link_errno));
  }
  if (linked) logging::get("braid.security")->info("created the per-user job secret {} (mode 0600)", path);
  return JobSecret::from_file(path);
}

}  // namespace

JobSecret resolve_job_secret() {
  if (auto text = env::get("BRAID_JOB_SECRET")) return JobSecret::from_text(*text, "BRAID_JOB_SECRET");
  if (auto file = env::get("BRAID_JOB_SECRET_FILE")) return JobSecret::from_file(*file);
  return load_or_create_user_secret();
}

JobSecret::JobSecret(std::string text, std::string source)
    : text_(std::move(text)), source_(std::move(source)), key_(sha256(text_)) {}

JobSecret JobSecret::generate() {
  std::array<uint8_t, 32> bytes{};
  BRAID_CHECK_TYPED(Error, RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) == 1,
                    "job secret: OpenSSL's RAND_bytes failed (no entropy?)");
  return JobSecret(hex(bytes.data(), bytes.size()), "generated");
}

JobSecret JobSecret::from_text(std::string_view text, std::string_view source) {
  BRAID_CHECK_ARG(text.size() >= kMinSecretChars,
                  "job secret from {} has {} characters; it needs at least {} (e.g. `openssl rand -hex 32`)", source,
                  text.size(), kMinSecretChars);
  return JobSecret(std::string(text), std::string(source));
}

JobSecret JobSecret::from_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  BRAID_CHECK_ARG(fd >= 0, "job secret file '{}': cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  std::string text;
  if (stated && S_ISREG(st.st_mode) && st.st_size <= 4096) {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  BRAID_CHECK_ARG(stated && S_ISREG(st.st_mode), "job secret file '{}' is not a regular file", path);
  BRAID_CHECK_ARG(st.st_size <= 4096, "job secret file '{}' has {} bytes; a secret is at most 4096", path,
                  static_cast<int64_t>(st.st_size));
  BRAID_CHECK_ARG(st.st_uid == ::geteuid(), "job secret file '{}' belongs to uid {}, not to this user (uid {})", path,
                  st.st_uid, ::geteuid());
  BRAID_CHECK_ARG((st.st_mode & 077) == 0,
                  "job secret file '{}' has mode {:04o}: others may read it; `chmod 600 {}` (only its owner may)",
                  path, st.st_mode & 07777, path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return from_text(text, "file '" + path + "'");
}

std::string JobSecret::fingerprint() const {
  const auto h = sha256(std::string_view(reinterpret_cast<const char*>(key_.data()), key_.size()));
  return hex(h.data(), 4);
}

JobSecret job_secret() {
  auto& p = process_secret();
  std::lock_guard lock(p.mu);
  if (!p.secret) {
    p.secret = resolve_job_secret();
    logging::get("braid.security")->debug("job secret {} from {}", p.secret->fingerprint(), p.secret->source());
  }
  return *p.secret;
}

void adopt_job_secret(JobSecret secret) {
  auto& p = process_secret();
  std::lock_guard lock(p.mu);
  logging::get("braid.security")->debug("job secret {} adopted from {}", secret.fingerprint(), secret.source());
  p.secret = std::move(secret);
}

bool has_job_secret() {
  auto& p = process_secret();
  std::lock_guard lock(p.mu);
  return p.secret.has_value();
}

std::string user_secret_path() {
  const auto home = env::get("HOME");
  BRAID_CHECK_ARG(home && !home->empty(),
                  "job secret: HOME is not set, so there is no per-user secret file; set BRAID_JOB_SECRET or "
                  "BRAID_JOB_SECRET_FILE");
  return *home + "/.braid/job_secret";
}

}  // namespace braid::security
