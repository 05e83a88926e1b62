// Sharding: a deterministic partition of a matrix's cells into n shards, for fleets
// (`--shard i/n`, one Slurm array task or CI job per shard). A cell's shard depends on
// its id alone (the first 16 hex digits of Cell::Id() mod n), so a cell lands on the
// same shard every night whatever else the matrix holds; shard sizes are therefore
// only roughly equal. Shards are numbered 1..n.
#pragma once

#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/status.h"

namespace framegate {

struct ShardSpec {
  int index = 1;  // 1..count
  int count = 1;
  std::string ToString() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// "2/4" -> {2, 4}. InvalidInput ("--shard '0/4': ...") unless 1 <= i <= n <= 10000.
StatusOr<ShardSpec> ParseShard(const std::string& text);
// The shard (1..count) a cell belongs to.
int ShardOf(const Cell& cell, int count);
// The cells of shard `index` of `count`, in their matrix order. Precondition:
// 1 <= index <= count.
std::vector<Cell> ShardCells(const std::vector<Cell>& cells, int index, int count);

}  // namespace framegate
