#include "harness/cell.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace framegate
