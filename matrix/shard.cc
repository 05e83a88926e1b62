#include "matrix/shard.h"

#include <cassert>
#include <cstdlib>

namespace framegate {
namespace {

// A decimal integer spelled with digits only (no sign, no spaces); -1 otherwise.
long ParseCount(const std::string& digits) {
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::strtol(digits.c_str(), nullptr, 10);
}

}  // namespace

StatusOr<ShardSpec> ParseShard(const std::string& text) {
  const std::string at = "--shard '" + text + "': ";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return Status::InvalidInput(at + "expected i/n, e.g. 1/4");
  const long index = ParseCount(text.substr(0, slash));
  const long count = ParseCount(text.substr(slash + 1));
  if (index < 0 || count < 0) return Status::InvalidInput(at + "expected i/n with whole numbers, e.g. 1/4");
  if (count < 1 || count > 10000) return Status::InvalidInput(at + "n must be from 1 to 10000");
  if (index < 1 || index > count)
    return Status::InvalidInput(at + "i must be from 1 to n (shards are numbered 1.." +
                                std::to_string(count) + ")");
  return ShardSpec{static_cast<int>(index), static_cast<int>(count)};
}

int ShardOf(const Cell& cell, int count) {
  assert(count >= 1);
  const uint64_t hash = std::strtoull(cell.Id().c_str(), nullptr, 16);
  return static_cast<int>(hash % static_cast<uint64_t>(count)) + 1;
}

std::vector<Cell> ShardCells(const std::vector<Cell>& cells, int index, int count) {
  assert(1 <= index && index <= count);
  std::vector<Cell> shard;
  for (const Cell& cell : cells) {
    if (ShardOf(cell, count) == index) shard.push_back(cell);
  }
  return shard;
}

}  // namespace framegate
