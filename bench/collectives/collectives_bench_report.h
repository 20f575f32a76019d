// The text `braid bench collectives` prints: the preamble, and per op its header, one nccl-tests row per
// size and the summary with the RESULT line (bench/README.md describes the columns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/collectives/collectives_bench.h"
#include "tensor/dtype.h"

namespace braid::bench {

std::string preamble(const CollectivesBenchOptions& o, int ranks, const std::string& launcher,
                     const std::vector<int64_t>& sizes);
// `hierarchy`: the braid group's two-level setting ("auto", "on", "off").
std::string op_header(const CollectivesBenchOptions& o, int ranks, BenchOp op, const std::string& raw_name,
                      const std::string& hierarchy = "auto");
std::string op_row(BenchOp op, DType dtype, const CollectivesBenchRow& r);
std::string op_summary(const CollectivesBenchOptions& o, int ranks, const CollectivesBenchTable& t);

}  // namespace braid::bench
