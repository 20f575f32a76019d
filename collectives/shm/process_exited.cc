#include "collectives/shm/process_exited.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace braid::collectives::shm {

bool process_exited(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;  // gone between the two looks; without /proc nothing more is known
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  char buf[512];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return n == 0;  // an empty stat: the process was reaped while it was read
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr || close_paren[1] != ' ') return false;
  const char state = close_paren[2];
  return state == 'Z' || state == 'X';
}

}  // namespace braid::collectives::shm
