#include "parallel/fsdp/reshard.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "autograd/grad_mode.h"
#include "base/check.h"
#include "base/error.h"
#include "parallel/fsdp/fsdp_unit.h"
#include "parallel/fsdp/unit_registry.h"
#include "tensor/factory.h"

namespace braid::parallel::fsdp {

namespace {

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

Shape part_shape(const RowPlan& plan, const ShardTarget& target) {
  if (plan.replicated && target.full_shape.empty()) return target.full_shape;
  Shape s = target.full_shape;
  s[0] = target.rows;
  return s;
}

}  // namespace

ShardTarget shard_target(const Tensor& t) {
  if (auto unit = unit_of_parameter(t); unit != nullptr && unit->is_sharded()) {
    const auto& params = unit->managed_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (!params[i].second.is_same(t)) continue;
      const ParamShardSpec& spec = unit->layout().param(i);
      const int rank = unit->group()->rank();
      return {spec.full_shape, spec.shard_start_row(rank), spec.shard_rows(rank)};
    }
  }
  return {t.shape(), 0, t.dim() == 0 ? 0 : t.size(0)};
}

RowPlan plan_rows(const std::string& what, const std::vector<Shape>& saved, const ShardTarget& target) {
  BRAID_CHECK_ARG(!saved.empty(), "{}: no saved entries to take it from", what);
  const Shape& full = target.full_shape;
  bool all_full = true;
  int64_t rows = 0;
  for (const Shape& s : saved) {
    all_full = all_full && s == full;
    rows += s.empty() ? 0 : s[0];
  }
  RowPlan plan;
  // Copies: every entry the full tensor (when the entries' rows also add up, there is one entry, or the
  // tensor has no rows: copies either way).
  if (all_full && (full.empty() || saved.size() == 1 || rows != full[0])) {
    plan.replicated = true;
    return plan;
  }
  std::string shapes;
  for (const Shape& s : saved) shapes += (shapes.empty() ? "" : ", ") + shape_str(s);
  BRAID_CHECK_ARG(!full.empty() && rows == full[0],
                  "{} is {} in full, but the {} saved entries hold {} ({} rows in all): neither shards of it nor "
                  "copies", what, shape_str(full), saved.size(), shapes, rows);
  const Shape rest_want(full.begin() + 1, full.end());
  int64_t at = 0;
  for (size_t r = 0; r < saved.size(); ++r) {
    const Shape rest_got(saved[r].begin() + 1, saved[r].end());
    BRAID_CHECK_ARG(rest_got == rest_want, "{} of rank {} is {}; a shard of {} must be [rows, {}]", what, r,
                    shape_str(saved[r]), shape_str(full), fmt::join(rest_want, ", "));
    // The overlap of this entry's rows [at, at + n) with the target's [start, start + rows).
    const int64_t n = saved[r][0];
    const int64_t begin = std::max(at, target.start_row);
    const int64_t end = std::min(at + n, target.start_row + target.rows);
    if (begin < end) plan.pieces.push_back({r, begin - at, begin - target.start_row, end - begin});
    at += n;
  }
  return plan;
}

Tensor assemble_part(const RowPlan& plan, const ShardTarget& target, DType dtype,
                     const std::function<Tensor(size_t)>& fetch) {
  if (plan.replicated) {
    const Tensor whole = fetch(0);
    return target.full_shape.empty() ? whole : whole.narrow(0, target.start_row, target.rows);
  }
  Tensor part = empty(part_shape(plan, target), TensorOptions(dtype));
  size_t fetched = SIZE_MAX;
  Tensor source;
  for (const RowPiece& p : plan.pieces) {  // in source order: each source fetched once
    if (p.source != fetched) {
      source = fetch(p.source);
      fetched = p.source;
    }
    part.narrow(0, p.dest_row, p.rows).copy_(source.narrow(0, p.source_row, p.rows));
  }
  return part;
}

ShardedFiles::ShardedFiles(const std::vector<std::string>& paths) {
  BRAID_CHECK_ARG(!paths.empty(), "ShardedFiles: no files given (one per saving rank)");
  files_.reserve(paths.size());
  for (const std::string& p : paths) files_.emplace_back(p);
}

Tensor ShardedFiles::part(const std::string& key, const ShardTarget& target) const {
  std::vector<Shape> shapes;
  for (const nn::StateDictFile& f : files_) {
    const nn::StateDictFile::Entry* e = f.find(key);
    BRAID_CHECK_ARG(e != nullptr, "{}: no entry '{}' (a checkpoint of another model?)", f.path(), key);
    shapes.push_back(e->header.shape);
  }
  RowPlan plan;
  try {
    plan = plan_rows(fmt::format("'{}' (in {} and the other saved ranks' files)", key, files_[0].path()), shapes,
                     target);
  } catch (const InvalidArgument& e) {
    BRAID_THROW(InvalidArgument, "{} (a checkpoint of another model?)", e.what());
  }
  const DType dtype = files_[0].find(key)->header.dtype;
  // A copy is the same in every file: taken from one this rank reads anyway.
  const size_t copy_from = preferred();
  return assemble_part(plan, target, dtype,
                       [&](size_t s) { return files_[plan.replicated ? copy_from : s].read(key); });
}

Tensor ShardedFiles::first(const std::string& key) const {
  const nn::StateDictFile& f = files_.at(preferred());
  BRAID_CHECK_ARG(f.find(key) != nullptr, "{}: no entry '{}' (a checkpoint of another model?)", f.path(), key);
  return f.read(key);
}

size_t ShardedFiles::preferred() const {
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i].payload_bytes_read() > 0) return i;
  }
  return 0;
}

std::vector<size_t> ShardedFiles::files_read() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < files_.size(); ++i) {
    if (files_[i].payload_bytes_read() > 0) out.push_back(i);
  }
  return out;
}

uint64_t ShardedFiles::payload_bytes_read() const {
  uint64_t n = 0;
  for (const nn::StateDictFile& f : files_) n += f.payload_bytes_read();
  return n;
}

void load_sharded_files(nn::Module& module, const ShardedFiles& files,
                        const std::function<std::string(const std::string&)>& entry_name, const std::string& prefix,
                        bool strict) {
  const nn::StateDict mine = module.state_dict();
  std::set<std::string> expected;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source): all read and checked, then copied
  for (const auto& [key, dest] : mine) {
    const std::string name = entry_name(key);
    expected.insert(name);
    if (!strict && files.file(0).find(name) == nullptr) continue;
    Tensor part = files.part(name, shard_target(dest));
    BRAID_CHECK_ARG(dest.shape() == part.shape(), "{}: '{}': this rank's part is {}, the module holds {}",
                    files.file(0).path(), name, shape_str(part.shape()), shape_str(dest.shape()));
    copies.emplace_back(dest, std::move(part));
  }
  if (strict) {
    for (size_t i = 0; i < files.size(); ++i) {
      for (const auto& e : files.file(i).entries()) {
        BRAID_CHECK_ARG(e.name.rfind(prefix, 0) != 0 || expected.count(e.name) > 0,
                        "{}: unexpected entry '{}': the model has no such state (a checkpoint of another model?)",
                        files.file(i).path(), e.name);
      }
    }
  }
  autograd::NoGradGuard no_grad;
  for (auto& [dest, src] : copies) dest.copy_(src);
}

void load_sharded_optim_files(nn::optim::Optimizer& optimizer, const ShardedFiles& files, const std::string& prefix) {
  nn::StateDict flat;
  for (const auto& e : files.file(0).entries()) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    const std::string key = e.name.substr(prefix.size());
    // state.<index>.<name> of a parameter: resharded unless a scalar ("step").
    size_t index = SIZE_MAX;
    if (key.rfind("state.", 0) == 0 && !e.header.shape.empty()) {
      const char* first = key.data() + 6;
      const char* last = key.data() + key.size();
      const auto [ptr, ec] = std::from_chars(first, last, index);
      if (ec != std::errc() || ptr == last || *ptr != '.') index = SIZE_MAX;
    }
    if (index == SIZE_MAX) {
      flat.emplace_back(key, files.first(e.name));
      continue;
    }
    BRAID_CHECK_ARG(index < optimizer.num_params(),
                    "{}: entry '{}' is the state of parameter {}, but the optimizer has {} parameters (a checkpoint "
                    "of another model?)", files.file(0).path(), e.name, index, optimizer.num_params());
    flat.emplace_back(key, files.part(e.name, shard_target(optimizer.params()[index])));
  }
  optimizer.load_state_dict(nn::optim::OptimizerStateDict::from_flat(flat));
}

}  // namespace braid::parallel::fsdp
