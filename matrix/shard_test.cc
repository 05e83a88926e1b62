#include "matrix/shard.h"

#include <gtest/gtest.h>

#include <set>

#include "matrix/matrix_spec.h"

namespace framegate {
namespace {

const std::vector<DeviceInfo> kTwoGpus = {DeviceInfo{"cpu", "Test CPU", "", 0, ""},
                                          DeviceInfo{"cuda:0", "GPU", "8.0", 0, ""},
                                          DeviceInfo{"cuda:1", "GPU", "9.0", 0, ""}};

TEST(ShardTest, ParsesIOfN) {
  StatusOr<ShardSpec> s = ParseShard("2/4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  EXPECT_EQ(s->ToString(), "2/4");
  EXPECT_TRUE(ParseShard("1/1").ok());
}

TEST(ShardTest, RejectsMalformedShardsWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"4", "--shard '4': expected i/n, e.g. 1/4"},
      {"a/4", "--shard 'a/4': expected i/n with whole numbers, e.g. 1/4"},
      {"-1/4", "--shard '-1/4': expected i/n with whole numbers, e.g. 1/4"},
      {" 1/4", "--shard ' 1/4': expected i/n with whole numbers, e.g. 1/4"},
      {"1/", "--shard '1/': expected i/n with whole numbers, e.g. 1/4"},
      {"0/4", "--shard '0/4': i must be from 1 to n (shards are numbered 1..4)"},
      {"5/4", "--shard '5/4': i must be from 1 to n (shards are numbered 1..4)"},
      {"1/0", "--shard '1/0': n must be from 1 to 10000"},
  };
  for (const auto& [text, message] : bad) {
    StatusOr<ShardSpec> s = ParseShard(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), Status::Code::kInvalidInput);
    EXPECT_EQ(s.status().message(), message);
  }
}

TEST(ShardTest, ShardsOfEveryShippedMatrixPartitionItForOneToSevenShards) {
  for (const std::string& name : ShippedMatrixNames()) {
    const StatusOr<MatrixSpec> spec = LoadMatrix(name, kTwoGpus);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    std::set<std::string> all;
    for (const Cell& c : spec->cells) all.insert(c.Id());
    for (int n = 1; n <= 7; ++n) {
      std::multiset<std::string> seen;
      for (int i = 1; i <= n; ++i) {
        const std::vector<Cell> shard = ShardCells(spec->cells, i, n);
        if (n == 1) {
          EXPECT_EQ(shard.size(), spec->cells.size());
        }
        size_t last = 0;  // cells keep their matrix order
        for (const Cell& c : shard) {
          seen.insert(c.Id());
          EXPECT_EQ(ShardOf(c, n), i);
          size_t at = 0;
          while (spec->cells[at].Id() != c.Id()) ++at;
          EXPECT_TRUE(at >= last);
          last = at;
        }
      }
      EXPECT_EQ(seen.size(), all.size()) << name << " n=" << n << ": overlap";
      EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), all) << name << " n=" << n;
    }
  }
}

TEST(ShardTest, ACellsShardDependsOnItsIdAloneAndIsStable) {
  const StatusOr<MatrixSpec> spec = LoadMatrix("nightly", kTwoGpus);
  ASSERT_TRUE(spec.ok());
  const std::vector<Cell> half(spec->cells.begin(), spec->cells.begin() + spec->cells.size() / 2);
  for (const Cell& c : ShardCells(half, 3, 5)) EXPECT_EQ(ShardOf(c, 5), 3);
  // Pinned: the id's first 16 hex digits mod n, shards numbered from 1.
  Cell cell;
  EXPECT_EQ(ShardOf(cell, 7), static_cast<int>(std::stoull(cell.Id(), nullptr, 16) % 7) + 1);
  // Every shard of nightly (165 cells on this host description) gets work when n = 4.
  for (int i = 1; i <= 4; ++i) EXPECT_GT(ShardCells(spec->cells, i, 4).size(), 20u) << i;
}

}  // namespace
}  // namespace framegate
