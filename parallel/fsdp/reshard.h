// Resharding: the rows that one rank of a new world needs of a tensor that N ranks saved as shards.
//
// A sharded module's state dict holds, per parameter, this rank's rows of dim 0 (unpadded, in rank order:
// shard_layout.h), so N saved entries of one key concatenate to the full tensor, and any rank of any
// other world knows from the entries' shapes alone which of them hold its rows. Entries that are the
// full tensor on every rank (a buffer, a NO_SHARD unit's parameter, scalars) are replicated: rank 0's.
//
// ShardedFiles does this over N ranks' checkpoint files, reading only the entries whose rows a rank
// needs; load_sharded_state_dicts (sharded_state_dict.h) over dicts in memory. Both use plan_rows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "nn/state_dict_file.h"

namespace braid::parallel::fsdp {

// Where a module tensor's values go: the full tensor's shape and the rows of it this rank holds (all of
// them when the tensor is not sharded: a buffer, a NO_SHARD unit's parameter, one no unit manages).
struct ShardTarget {
  Shape full_shape;
  int64_t start_row = 0;
  int64_t rows = 0;
};
// For a parameter handle or buffer of a module (sharded or not), or an optimizer's parameter.
ShardTarget shard_target(const Tensor& t);

// Rows [source_row, source_row + rows) of saved entry `source` go to rows [dest_row, ...) of the part.
struct RowPiece {
  size_t source = 0;
  int64_t source_row = 0;
  int64_t dest_row = 0;
  int64_t rows = 0;
};
struct RowPlan {
  bool replicated = false;  // every entry is the full tensor: the part comes from entry 0 alone
  std::vector<RowPiece> pieces;  // in source order
};
// The plan for `target`'s rows from the saved entries' shapes (one per saved rank, in rank order).
// InvalidArgument naming `what` when the shapes are neither shards of the full tensor nor copies of it.
RowPlan plan_rows(const std::string& what, const std::vector<Shape>& saved, const ShardTarget& target);
// The part (shape [target.rows, full_shape[1:]...], or the full shape when replicated or 0-dimensional),
// from the entries that fetch(source) returns; fetch is called once for each source the part reads
// (source 0 alone when replicated).
// `dtype`: the saved entries' (a part of no rows fetches nothing).
Tensor assemble_part(const RowPlan& plan, const ShardTarget& target, DType dtype,
                     const std::function<Tensor(size_t)>& fetch);

// N saved ranks' state-dict files of one checkpoint, opened (headers only) in rank order.
class ShardedFiles {
 public:
  explicit ShardedFiles(const std::vector<std::string>& paths);

  size_t size() const { return files_.size(); }
  const nn::StateDictFile& file(size_t i) const { return files_.at(i); }
  // This rank's part of entry `key` (the part's shape: assemble_part). Reads only the files whose rows
  // it needs. InvalidArgument naming the file and key when a file lacks the entry, and naming the key
  // and shapes when they do not fit the target (a checkpoint of another model).
  Tensor part(const std::string& key, const ShardTarget& target) const;
  // Entry `key` as every rank saved it (a replicated value: a scalar, an option), from the first file
  // read so far (file 0 before any).
  Tensor first(const std::string& key) const;
  // Files part() and first() have read tensors from, so far (ascending).
  std::vector<size_t> files_read() const;
  uint64_t payload_bytes_read() const;

 private:
  size_t preferred() const;  // the first file read from so far, or 0

  std::vector<nn::StateDictFile> files_;
};

// Loads `module` (sharded over any world, or not at all) from `files`: the entry of each key k of
// module.state_dict() is entry_name(k). Every part is read and checked before the first is copied in;
// strict: file 0 may have no other entry that entry_name's prefix `prefix` starts.
void load_sharded_files(nn::Module& module, const ShardedFiles& files,
                        const std::function<std::string(const std::string&)>& entry_name, const std::string& prefix,
                        bool strict = true);

// Loads `optimizer` (over a sharded module's parameters) from `files`' entries prefix +
// OptimizerStateDict::to_flat()'s keys: shard-shaped state is resharded to this rank's rows, the rest
// (scalars, options, the parameter count) is file 0's. The optimizer's own load_state_dict checks the
// result and changes nothing on error.
void load_sharded_optim_files(nn::optim::Optimizer& optimizer, const ShardedFiles& files, const std::string& prefix);

}  // namespace braid::parallel::fsdp
