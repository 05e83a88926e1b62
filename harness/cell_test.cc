#include "harness/cell.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "harness/sha256.h"

namespace framegate {
namespace {

TEST(Sha256Test, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CellTest, IdIsStableAndDependsOnIdentityOnly) {
  Cell cell;
  cell.policy = "fp16";
  cell.seed = 3;
  EXPECT_EQ(cell.CanonicalString(),
            "v1|pipeline=reference:tiny|device=cpu|policy=fp16|seed=3|fault=|sampler=|steps=0|"
            "guidance=0");
  EXPECT_EQ(cell.Id(), Sha256Hex(cell.CanonicalString()).substr(0, 16));
  const std::string id = cell.Id();
  cell.xfail = "known";
  cell.tolerance = "loose";
  EXPECT_EQ(cell.Id(), id);
  cell.seed = 4;
  EXPECT_NE(cell.Id(), id);
}

TEST(CellTest, ModelPackageIsNamedByItsFolder) {
  Cell a, b;
  a.model_dir = "/home/a/models/svd-lite/";
  b.model_dir = "/srv/fleet/svd-lite";
  EXPECT_EQ(a.Pipeline(), "model:svd-lite");
  EXPECT_EQ(a.Id(), b.Id());
  EXPECT_EQ(a.Label(), "model:svd-lite cpu fp32 seed=0");
}

TEST(CellTest, ReproArgumentsComeFromTheFieldList) {
  Cell cell;
  cell.policy = "bf16";
  cell.seed = 2;
  cell.steps = 4;
  cell.guidance = 7.5;
  cell.xfail = "known";  // no flag: not in the command
  EXPECT_EQ(CheckArgsFor(cell),
            (std::vector<std::string>{"check", "--size", "tiny", "--device", "cpu", "--policy", "bf16",
                                      "--seed", "2", "--steps", "4", "--guidance", "7.5"}));
  cell.model_dir = "/m/pkg";
  cell.policy_file = "/m/policies.toml";
  cell.tolerance = "strict";
  const std::vector<std::string> args = CheckArgsFor(cell);
  EXPECT_EQ(args[1], "--model");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--size"), 0);
  EXPECT_NE(std::find(args.begin(), args.end(), "--policy-file"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "--tolerance"), args.end());
}

TEST(CellTest, VariantFieldsAreTheSetIdentityFieldsBesideDevicePolicyAndSeed) {
  Cell cell;
  EXPECT_TRUE(VariantFields(cell).empty());
  cell.fault = "attn-overflow";
  cell.steps = 3;
  const std::vector<std::pair<std::string, std::string>> expected = {{"fault", "attn-overflow"},
                                                                     {"steps", "3"}};
  EXPECT_EQ(VariantFields(cell), expected);
}

}  // namespace
}  // namespace framegate
