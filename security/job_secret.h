// The job secret: the key every braid connection of one job proves it holds (docs/SECURITY.md).
//
// Where a process finds it, first match wins:
//   1. one adopted from the bootstrap (mpirun: rank 0's, broadcast over MPI; `braid launch` hands its own
//      to the ranks in BRAID_JOB_SECRET);
//   2. BRAID_JOB_SECRET: the secret itself (at least 16 characters);
//   3. BRAID_JOB_SECRET_FILE: a file that only its owner may read (mode 0600 or 0400, owned by this user);
//   4. ~/.braid/job_secret, created with 32 random bytes (mode 0600) on first use: every job of one user
//      shares it, and other users cannot read it. A cluster without a shared home sets 2 or 3.
// The key is SHA-256 of the secret's text, so any text of the minimum length works.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace braid::security {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kMinSecretChars = 16;

class JobSecret {
 public:
  // 32 fresh random bytes (OpenSSL's RAND_bytes), as 64 hex characters.
  static JobSecret generate();
  // The secret's text; throws InvalidArgument naming `source` when it is shorter than kMinSecretChars.
  static JobSecret from_text(std::string_view text, std::string_view source);
  // A secret file's content (one trailing newline dropped). Refuses a file that others may read or that
  // another user owns, naming the file, its mode and owner.
  static JobSecret from_file(const std::string& path);

  // The text to hand to a child process (BRAID_JOB_SECRET) or to broadcast. Never log it.
  const std::string& text() const { return text_; }
  const std::array<uint8_t, kKeyBytes>& key() const { return key_; }
  // Eight hex characters of a hash of the key: safe to print, tells two secrets apart in logs.
  std::string fingerprint() const;
  // Where the secret came from ("BRAID_JOB_SECRET", a file's path, "generated", "rank 0 over MPI").
  const std::string& source() const { return source_; }

  bool operator==(const JobSecret& other) const { return key_ == other.key_; }

 private:
  JobSecret(std::string text, std::string source);
  std::string text_;
  std::string source_;
  std::array<uint8_t, kKeyBytes> key_{};
};

// The process's secret, resolved once (the list above) and then kept. Thread-safe.
JobSecret job_secret();
// Replaces the process's secret with the one its bootstrap agreed on; later servers and clients use it.
void adopt_job_secret(JobSecret secret);
// What job_secret() resolves on first use (2. to 4. above), without keeping it: for tests and tools.
JobSecret resolve_job_secret();
// Whether a secret has been resolved or adopted (for tests and `braid info`).
bool has_job_secret();

// The per-user secret file (4. above): $HOME/.braid/job_secret.
std::string user_secret_path();

}  // namespace braid::security
