// The layout of a job's checkpoints under checkpoint.dir:
//
//   <dir>/step-00000012/rank-0.brsd ... rank-<W-1>.brsd   each rank's state (nn::save_state_dict, atomic)
//   <dir>/step-00000012/meta.json   {"step", "epoch", "data", "world_size", "roles", "parts", "job"}
//                                   ("data": the data cursor, driver.h; "parts": the worker rank that
//                                   saved each remote part): written last, so a step directory with
//                                   meta.json is complete
//   <dir>/latest                    "step-00000012\n": the newest complete checkpoint
//
// meta.json and latest are written to a temporary file, fsync'ed and renamed over the old one (then the
// directory is fsync'ed), so a crash leaves either the old or the new file, never a torn one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid::runtime {

std::string step_dir_name(int64_t step);  // "step-00000012"
std::string rank_state_path(const std::string& step_dir, int rank);  // <step_dir>/rank-<R>.brsd

// Writes `text` to `path` atomically (temp file, fsync, rename, fsync of the directory).
void write_file_atomically(const std::string& path, const std::string& text);

// Creates <dir>/step-<N> (and <dir>) and returns its path.
std::string make_step_dir(const std::string& dir, int64_t step);
// Writes meta.json into the step directory, then points <dir>/latest at it, then keeps only the newest
// `keep` complete step directories.
void commit_checkpoint(const std::string& dir, const std::string& step_dir, const nlohmann::json& meta, int keep);

struct CheckpointRef {
  std::string step_dir;  // absolute
  nlohmann::json meta;
};
// The checkpoint <dir>/latest names; nullopt when there is none. InvalidArgument for a latest that names a
// missing or incomplete directory (naming both).
std::optional<CheckpointRef> read_latest(const std::string& dir);
// One step directory's checkpoint. InvalidArgument when it has no meta.json or that is not valid JSON.
CheckpointRef read_step_dir(const std::string& step_dir);

// Over how many trainers one copy of the model's parameters is sharded, by a job's "fsdp" (to_json) and
// trainer count: the trainer count (full_shard, shard_grad_op), fsdp.shard_group_size (hybrid_shard), or
// 1 when every trainer holds all of it (no FSDP, no_shard).
size_t shard_world(const nlohmann::json& fsdp, size_t trainers);
// The files of one saved shard group of checkpoint `ref`: those of its first shard_world() trainers,
// which together hold every row of the model and of its optimizer state. InvalidArgument naming the file
// and what it was for when one is missing.
std::vector<std::string> shard_group_files(const CheckpointRef& ref);

}  // namespace braid::runtime
