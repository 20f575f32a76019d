// Paths that come from outside the process, from a file a job did not write itself (a checkpoint's
// `latest`) or from the network (the path argument of "braid.save_modules"), are followed only inside one
// of the job's own directories: a peer or a planted file must not make a rank, possibly running as root,
// write or read anywhere else.
//
// A path is confined to a root when, after resolving every symbolic link that exists (weakly_canonical),
// its components begin with the root's (also resolved). Before that, a path that spells ".." anywhere is
// refused outright, and so is one that goes through a symbolic link that leads nowhere (weakly_canonical
// cannot resolve it, and writing through it would create its target wherever it points).
#pragma once

#include <string>
#include <string_view>

namespace braid::runtime {

// `path` resolved and confined to `root`; a relative `path` is taken relative to `root`. Throws
// InvalidArgument "<what>: '<path>' ..." naming the root and the reason. The message never includes
// anything read from the file itself.
std::string confine_path(const std::string& path, const std::string& root, std::string_view what);

}  // namespace braid::runtime
