// Loading plugins (plugin.h) into this process: `braid run` and `braid check` load every plugin a job names
// on every rank, before the job starts, so that the job's model, loss, data kind and comm hook are found by
// name like the built-in ones.
//
// Each failure is an InvalidArgument that names the library and what is wrong with it: no such file, not
// a loadable library (the loader's own message, e.g. a missing dependency), not a braid plugin (no
// braid_plugin_info), a missing entry point (braid_plugin_register), built against another braid version
// or ABI (naming both versions), a registration that threw or registered a name already taken.
#pragma once

#include <string>
#include <vector>

#include "runtime/job/job_spec.h"

namespace braid::runtime {

// What a loaded plugin registered, for `braid check` and for messages.
struct LoadedPlugin {
  std::string path;  // the file as opened (absolute, symlinks resolved)
  std::string name;
  std::string version;
  std::vector<std::string> models;
  std::vector<std::string> losses;
  std::vector<std::string> datasets;
  std::vector<std::string> comm_hooks;
};

// Loads the plugin at `path` (once per process: the same file again returns the first load). `named_by`
// says which key of which file named it, for messages ("model.plugin in job.yaml").
LoadedPlugin load_plugin(const std::string& path, const std::string& named_by = {});
std::vector<LoadedPlugin> loaded_plugins();  // in load order

// Loads job.plugins, then job.model.plugin, then checks that model.plugin registers model.kind (listing what
// it does register otherwise). Returns the job's plugins in that order.
std::vector<LoadedPlugin> load_job_plugins(const JobSpec& job);

// "my_net 1.0 (/abs/libmy_net.so): models my_net; losses my_loss" for `braid check`.
std::string describe(const LoadedPlugin& plugin);

}  // namespace braid::runtime
