// Paths from outside the process are followed only inside the job's directories (runtime/run/
// confined_path.h): a checkpoint's `latest`, and the path a caller gives the RPC functions
// braid.save_modules and braid.load_modules. Refused: absolute paths elsewhere, "..", symbolic links that
// lead out (or nowhere); and no error echoes what a file outside holds.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <variant>

#include "base/error.h"
#include "rpc/registry.h"
#include "rpc/value.h"
#include "runtime/job/job_spec.h"
#include "runtime/run/checkpoint_dir.h"
#include "runtime/run/confined_path.h"
#include "runtime/run/rank_service.h"
#include "tests/support/error_of.h"
#include "tests/support/temp_dir.h"

namespace braid::runtime {
namespace {

namespace fs = std::filesystem;
using braid::testing::error_of;
using braid::testing::TempDir;
using Catch::Matchers::Contains;

// A file outside the job's directories whose start an error must never quote.
std::string secret_file(const TempDir& tmp) { return tmp.write("secret", "SECRET-CONTENTS\n"); }

rpc::Value call(const std::string& function, const std::string& path) {
  const auto fn = rpc::global_registry().find_function(function);
  REQUIRE(fn != nullptr);
  return std::get<rpc::SyncFunction>(*fn)(rpc::Args{rpc::Value(path), rpc::list({})});
}

}  // namespace

TEST_CASE("confine_path: inside the root only, links resolved", "[runtime][run][confine]") {
  TempDir tmp("confine");
  const fs::path root = tmp.path() / "ckpt";
  fs::create_directories(root / "step-1");
  const std::string inside = (fs::weakly_canonical(root) / "step-1" / "rank-0.brsd").string();
  CHECK(confine_path("step-1/rank-0.brsd", root.string(), "t") == inside);
  CHECK(confine_path(inside, root.string(), "t") == inside);
  CHECK(confine_path(inside, root.string() + "/", "t") == inside);
  CHECK_THAT(error_of([&] { confine_path("step-1/../../x", root.string(), "t"); }), Contains("t: 'step-1/../../x' "
                                                                                            "contains '..'"));
  CHECK_THAT(error_of([&] { confine_path("/etc/passwd", root.string(), "t"); }),
             Contains("t: '/etc/passwd' resolves to '/etc/passwd', outside"));
  // A sibling whose name starts with the root's is outside: components are compared, not characters.
  fs::create_directories(tmp.path() / "ckpt-other");
  CHECK_THAT(error_of([&] { confine_path((tmp.path() / "ckpt-other" / "f").string(), root.string(), "t"); }),
             Contains("outside"));
  // A link inside that leads out, whether to a directory or a file, and one that leads nowhere.
  fs::create_directory_symlink(tmp.path() / "ckpt-other", root / "out");
  CHECK_THAT(error_of([&] { confine_path("out/f", root.string(), "t"); }), Contains("outside"));
  fs::create_symlink("/etc/passwd", root / "passwd");
  CHECK_THAT(error_of([&] { confine_path("passwd", root.string(), "t"); }), Contains("outside"));
  fs::create_symlink(root / "no-such-file", root / "dangling");
  CHECK_THAT(error_of([&] { confine_path("dangling", root.string(), "t"); }), Contains("leads nowhere"));
  CHECK_THAT(error_of([&] { confine_path("dangling/f", root.string(), "t"); }), Contains("leads nowhere"));
  CHECK_THAT(error_of([&] { confine_path("x", "", "t"); }), Contains("checkpoint.dir is not set"));
}

TEST_CASE("checkpoint: latest is followed only inside checkpoint.dir", "[runtime][run][confine]") {
  TempDir tmp("latest");
  const std::string dir = (tmp.path() / "ckpt").string();
  const std::string step_dir = make_step_dir(dir, 3);
  commit_checkpoint(dir, step_dir, {{"step", 3}}, /*keep=*/2);
  REQUIRE(read_latest(dir).has_value());
  // A complete checkpoint outside, which an edited (or planted) latest points at.
  const std::string elsewhere = make_step_dir((tmp.path() / "elsewhere").string(), 9);
  write_file_atomically((fs::path(elsewhere) / "meta.json").string(), "{\"step\": 9}\n");
  const std::string latest = (fs::path(dir) / "latest").string();

  write_file_atomically(latest, elsewhere + "\n");
  CHECK_THAT(error_of([&] { read_latest(dir); }), Contains("names the absolute path") && Contains(elsewhere));
  write_file_atomically(latest, "../elsewhere/step-00000009\n");
  CHECK_THAT(error_of([&] { read_latest(dir); }), Contains("contains '..'"));
  fs::create_directory_symlink(elsewhere, fs::path(dir) / "step-00000010");
  write_file_atomically(latest, "step-00000010\n");
  CHECK_THAT(error_of([&] { read_latest(dir); }), Contains("outside"));
  // `latest` itself must be the regular file braid writes: a link is not read (its first line would be
  // quoted in the errors above), nor is anything past the first 256 bytes.
  fs::remove(latest);
  fs::create_symlink(secret_file(tmp), latest);
  CHECK_THAT(error_of([&] { read_latest(dir); }), Contains("is not a regular file") && !Contains("SECR"));
  fs::remove(latest);
  write_file_atomically(latest, "");
  CHECK_THAT(error_of([&] { read_latest(dir); }), Contains("is empty"));
  write_file_atomically(latest, "step-00000003\n");
  CHECK(read_latest(dir)->meta.at("step") == 3);
}

TEST_CASE("rpc: braid.save_modules and braid.load_modules stay inside checkpoint.dir", "[runtime][run][confine]") {
  TempDir tmp("rpc_paths");
  const fs::path ckpt = tmp.path() / "ckpt";
  fs::create_directories(ckpt / "step-00000001");
  // A file outside the job's directories with a known start, as /etc/shadow was in the report.
  const std::string secret = secret_file(tmp);
  static JobSpec job;  // the service keeps a pointer to it
  job = parse_job_text("roles: {trainers: 1}\nmodel: {kind: mlp}\ncheckpoint: {dir: " + ckpt.string() + "}\n",
                       "job.yaml", tmp.path().string());
  RankService::instance().configure(job, 0);
  register_rank_functions();

  const std::string outside = (tmp.path() / "written-by-a-stranger").string();
  CHECK_THAT(error_of([&] { call("braid.save_modules", outside); }),
             Contains("braid.save_modules: '" + outside + "' resolves to") && Contains("outside"));
  CHECK_FALSE(fs::exists(outside));
  CHECK_THAT(error_of([&] { call("braid.save_modules", (ckpt / ".." / "x").string()); }), Contains("contains '..'"));

  const std::string message = error_of([&] { call("braid.load_modules", secret); });
  CHECK_THAT(message, Contains("braid.load_modules") && Contains("outside"));
  CHECK_THAT(message, !Contains("SECR") && !Contains("0x"));
  const std::string shadow = error_of([&] { call("braid.load_modules", "/etc/shadow"); });
  CHECK_THAT(shadow, Contains("'/etc/shadow' resolves to '/etc/shadow', outside"));

  // Inside, both work: save writes the (here empty) state, load reads it back.
  const std::string inside = (ckpt / "step-00000001" / "rank-1.brsd").string();
  call("braid.save_modules", inside);
  CHECK(fs::exists(inside));
  call("braid.load_modules", inside);
  // A file inside that is not a state dict: the error says so without echoing its bytes.
  std::ofstream(ckpt / "step-00000001" / "junk.brsd") << "SECRET-CONTENTS";
  const std::string junk = error_of([&] { call("braid.load_modules", (ckpt / "step-00000001" / "junk.brsd").string()); });
  CHECK_THAT(junk, Contains("bad magic") && !Contains("0x") && !Contains("SECR"));
}

}  // namespace braid::runtime
