#include "runtime/run/confined_path.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "base/check.h"

namespace braid::runtime {
namespace {

namespace fs = std::filesystem;

// The path's components without the empty one a trailing '/' leaves, so that "dir/" and "dir" compare
// equal component by component.
std::vector<fs::path> components(const fs::path& p) {
  std::vector<fs::path> out;
  for (const fs::path& c : p) {
    if (!c.empty() && c != ".") out.push_back(c);
  }
  return out;
}

fs::path resolved(const fs::path& p, std::string_view what, const std::string& shown) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p), ec);
  BRAID_CHECK_ARG(!ec, "{}: cannot resolve '{}': {}", what, shown, ec.message());
  return r;
}

}  // namespace

std::string confine_path(const std::string& path, const std::string& root, std::string_view what) {
  BRAID_CHECK_ARG(!root.empty(), "{}: '{}' cannot be checked: the job has no directory for it (checkpoint.dir "
                  "is not set)", what, path);
  BRAID_CHECK_ARG(!path.empty(), "{}: an empty path", what);
  const fs::path given(path);
  for (const fs::path& c : given) {
    BRAID_CHECK_ARG(c != "..", "{}: '{}' contains '..'; paths must stay inside {}", what, path, root);
  }
  const fs::path full = given.is_absolute() ? given : fs::path(root) / given;
  const fs::path base = resolved(root, what, root);
  const fs::path target = resolved(full, what, path);
  const std::vector<fs::path> b = components(base);
  const std::vector<fs::path> t = components(target);
  const bool inside = t.size() >= b.size() && std::equal(b.begin(), b.end(), t.begin());
  BRAID_CHECK_ARG(inside, "{}: '{}' resolves to '{}', outside {} (symbolic links included); refused", what, path,
                  target.string(), base.string());
  // weakly_canonical resolved every link that leads somewhere; one left on the way below the root leads
  // nowhere, and creating a file or directory through it would create its target, wherever that is.
  fs::path walk = base;
  for (size_t i = b.size(); i < t.size(); ++i) {
    walk /= t[i];
    std::error_code ec;
    BRAID_CHECK_ARG(!fs::is_symlink(fs::symlink_status(walk, ec)),
                    "{}: '{}' goes through '{}', a symbolic link that leads nowhere; refused", what, path, walk.string());
  }
  return target.string();
}

}  // namespace braid::runtime
