#include "cli/info_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <string>

#include "runtime/build_info.h"
#include "runtime/launch_env.h"

namespace braid::cli {
namespace {

using runtime::BuildInfo;
using runtime::LaunchEnv;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string where(const LaunchEnv& env) {
  if (env.launcher == runtime::Launcher::None) return "single process (no launcher detected)";
  return fmt::format("rank {} of {} (launched by {})", env.rank, env.world_size, runtime::launcher_name(env.launcher));
}

std::string render_text(const BuildInfo& info, const LaunchEnv& env) {
  std::string out = fmt::format("braid {} ({})\n", info.version, info.build_type);
  out += fmt::format("  {:<11} {}\n", "compiler", info.compiler);
  out += fmt::format("  {:<11} {}\n", "sanitizers", info.sanitizers);
  out += fmt::format("  {:<11} {}\n", "process", where(env));

  out += "\nbackends\n";
  for (const auto& c : info.components) {
    std::string line;
    if (!c.built) {
      line = "off, " + c.details.front().second;
    } else {
      for (const auto& [key, value] : c.details) {
        if (!line.empty()) line += "; ";
        line += key + ": " + value;
      }
    }
    out += fmt::format("  {:<11} {}\n", c.name, line);
  }

  const auto& d = info.devices;
  out += "\ndevices\n";
  out += fmt::format("  {:<11} {} cores online, {} usable by this process\n", "cpu", d.cpu_cores_online,
                     d.cpu_cores_usable);
  if (d.cuda_devices.empty()) {
    out += fmt::format("  {:<11} no CUDA device: {}\n", "cuda", d.cuda_unavailable);
  }
  for (size_t i = 0; i < d.cuda_devices.size(); ++i) {
    out += fmt::format("  {:<11} {}\n", fmt::format("cuda:{}", i), d.cuda_devices[i]);
  }
  return out;
}

std::string render_json(const BuildInfo& info, const LaunchEnv& env) {
  // ordered_json keeps the fields in the order of the text report.
  nlohmann::ordered_json j;
  j["braid"] = {{"version", info.version},
                {"build_type", info.build_type},
                {"compiler", info.compiler},
                {"sanitizers", info.sanitizers}};
  j["process"] = {{"launcher", std::string(runtime::launcher_name(env.launcher))},
                  {"rank", env.rank},
                  {"world_size", env.world_size}};
  auto& backends = j["backends"] = nlohmann::ordered_json::object();
  for (const auto& c : info.components) {
    nlohmann::ordered_json entry = {{"built", c.built}};
    for (const auto& [key, value] : c.details) entry[key] = value;
    backends[lower(c.name)] = entry;
  }
  const auto& d = info.devices;
  j["devices"] = {{"cpu", {{"cores_online", d.cpu_cores_online}, {"cores_usable", d.cpu_cores_usable}}},
                  {"cuda", d.cuda_devices},
                  {"cuda_unavailable", d.cuda_unavailable}};
  return j.dump(2) + "\n";
}

}  // namespace

CLI::App* add_info_command(CLI::App& app, InfoOptions& options) {
  CLI::App* cmd = app.add_subcommand(
      "info", "Print what this build of braid contains and the devices this process sees");
  cmd->add_flag("--json", options.json, "Print one JSON object instead of the text report");
  cmd->footer(
      "Run it first on a new machine, and paste its output into bug reports.\n"
      "Under a launcher every rank reports, which shows what each node sees:\n"
      "  mpirun -np 2 braid info");
  return cmd;
}

int run_info_command(const InfoOptions& options, const runtime::LaunchEnv& env) {
  const BuildInfo info = runtime::gather_build_info();
  const std::string text = options.json ? render_json(info, env) : render_text(info, env);
  // One write per report, so that the reports of several ranks under mpirun do not interleave line by line.
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace braid::cli
