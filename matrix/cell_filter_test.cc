#include "matrix/cell_filter.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

Cell MakeCell(const std::string& device, const std::string& policy, uint64_t seed,
              const std::string& fault = "") {
  Cell c;
  c.device = device;
  c.policy = policy;
  c.seed = seed;
  c.fault = fault;
  return c;
}

const std::vector<Cell> kCells = {
    MakeCell("cpu", "fp32", 0), MakeCell("cpu", "fp16", 0), MakeCell("cuda:0", "fp16", 1),
    MakeCell("cuda:0", "fp16-emulated", 0, "attn-overflow"), MakeCell("cuda:1", "bf16", 2)};

std::vector<std::string> Kept(const std::string& expression) {
  StatusOr<CellFilter> filter = CellFilter::Parse(expression);
  EXPECT_TRUE(filter.ok()) << filter.status().ToString();
  std::vector<std::string> labels;
  if (!filter.ok()) return labels;
  for (const Cell& c : filter->Apply(kCells))
    labels.push_back(c.device + "/" + c.policy + "/" + std::to_string(c.seed));
  return labels;
}

using V = std::vector<std::string>;

TEST(CellFilterTest, EqualsAndIsAnd) {
  EXPECT_EQ(Kept("policy=fp16"), (V{"cpu/fp16/0", "cuda:0/fp16/1"}));
  EXPECT_EQ(Kept("policy=fp16,device=cpu"), (V{"cpu/fp16/0"}));
  EXPECT_EQ(Kept(" policy = fp16 , seed = 1 "), (V{"cuda:0/fp16/1"}));
  EXPECT_EQ(Kept("pipeline=tiny").size(), 5u);
  EXPECT_EQ(Kept("pipeline=reference:tiny").size(), 5u);
  EXPECT_EQ(Kept("size=small").size(), 0u);
}

TEST(CellFilterTest, NotEqualsAndContains) {
  EXPECT_EQ(Kept("device~cuda,policy!=fp16"), (V{"cuda:0/fp16-emulated/0", "cuda:1/bf16/2"}));
  EXPECT_EQ(Kept("policy~fp16,fault="), (V{"cpu/fp16/0", "cuda:0/fp16/1"}));
  EXPECT_EQ(Kept("fault=none").size(), 4u);
  EXPECT_EQ(Kept("fault~overflow"), (V{"cuda:0/fp16-emulated/0"}));
  EXPECT_EQ(Kept("id=" + kCells[4].Id()), (V{"cuda:1/bf16/2"}));
}

TEST(CellFilterTest, BadExpressionsAreOneLineErrors) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"polcy=fp16",
       "--filter 'polcy=fp16': unknown key 'polcy' (known: pipeline, device, policy, "
       "seed, fault, sampler, steps, guidance, id, size, xfail, requires)"},
      {"fp16", "--filter 'fp16': 'fp16' is not key=value, key!=value or key~text"},
      {"policy=fp16,", "--filter 'policy=fp16,': empty term (terms are key=value, key!=value, key~text)"},
      {"=fp16", "--filter '=fp16': '=fp16' is not key=value, key!=value or key~text"},
      {"policy!fp16", "--filter 'policy!fp16': 'policy!fp16': '!' must be followed by '='"},
      {"", "--filter '': no terms"},
  };
  for (const auto& [expression, message] : bad) {
    StatusOr<CellFilter> filter = CellFilter::Parse(expression);
    ASSERT_FALSE(filter.ok()) << expression;
    EXPECT_EQ(filter.status().message(), message);
  }
}

}  // namespace
}  // namespace framegate
