// Expansion rules of docs/matrix.md: product order, exclude, include (GitHub Actions
// semantics), the include/exclude contradiction, duplicates, xfail, requires, tolerance,
// and the "cuda"/"all" device values.
#include "matrix/matrix_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "harness/test_temp_dir.h"

namespace framegate {
namespace {

DeviceInfo Device(const std::string& device, const std::string& capability) {
  DeviceInfo d;
  d.device = device;
  d.name = device == "cpu" ? "Test CPU" : "Test GPU";
  d.capability = capability;
  return d;
}
const std::vector<DeviceInfo> kCpuOnly = {Device("cpu", "avx2 avx512f")};
const std::vector<DeviceInfo> kTwoGpus = {Device("cpu", "avx2"), Device("cuda:0", "8.0"),
                                          Device("cuda:1", "7.0")};

MatrixSpec Expand(const std::string& toml, const std::vector<DeviceInfo>& found = kCpuOnly) {
  StatusOr<MatrixSpec> spec = ParseMatrix(toml, "m.toml", "", found);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : MatrixSpec();
}

std::string ExpandError(const std::string& toml, const std::vector<DeviceInfo>& found = kCpuOnly) {
  StatusOr<MatrixSpec> spec = ParseMatrix(toml, "m.toml", "", found);
  EXPECT_FALSE(spec.ok());
  return spec.ok() ? "" : spec.status().message();
}

std::vector<std::string> Labels(const MatrixSpec& spec) {
  std::vector<std::string> labels;
  for (const Cell& c : spec.cells) labels.push_back(c.Label());
  return labels;
}

const char* kTwoByTwo = R"(
[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = ["fp32", "bf16"]
seeds = [0, 1]
)";

TEST(MatrixExpandTest, ProductIsInAxisOrderWithValuesAsWritten) {
  const MatrixSpec spec = Expand(kTwoByTwo);
  EXPECT_EQ(Labels(spec),
            (std::vector<std::string>{"reference:tiny cpu fp32 seed=0", "reference:tiny cpu fp32 seed=1",
                                      "reference:tiny cpu bf16 seed=0", "reference:tiny cpu bf16 seed=1"}));
  EXPECT_EQ(spec.name, "m");
  EXPECT_EQ(spec.repeats, 1);
  EXPECT_EQ(spec.warmup, 0);
  EXPECT_EQ(spec.timeout_seconds, 0);
  EXPECT_EQ(Expand(kTwoByTwo).cells[3].Id(), spec.cells[3].Id());  // deterministic
}

TEST(MatrixExpandTest, ExcludeRemovesCombinationsMatchingEveryGivenKey) {
  const MatrixSpec spec = Expand(std::string(kTwoByTwo) + R"(
[[exclude]]
policy = "bf16"
seed = 1
)");
  EXPECT_EQ(Labels(spec),
            (std::vector<std::string>{"reference:tiny cpu fp32 seed=0", "reference:tiny cpu fp32 seed=1",
                                      "reference:tiny cpu bf16 seed=0"}));
}

TEST(MatrixExpandTest, IncludeMatchingCombinationsAddsKeysWithoutChangingThem) {
  const MatrixSpec spec = Expand(std::string(kTwoByTwo) + R"(
[[include]]
policy = "bf16"
requires = ["bf16"]
tolerance = "fp32"

[[include]]
seed = 1
requires = ["cuda"]
)");
  ASSERT_EQ(spec.cells.size(), 4u);
  EXPECT_TRUE(spec.cells[0].requirements.empty());
  EXPECT_EQ(spec.cells[1].requirements, std::vector<std::string>{"cuda"});
  EXPECT_EQ(spec.cells[2].requirements, std::vector<std::string>{"bf16"});
  EXPECT_EQ(spec.cells[3].requirements, (std::vector<std::string>{"bf16", "cuda"}));
  EXPECT_EQ(spec.cells[2].tolerance, "fp32");
  EXPECT_EQ(spec.cells[0].tolerance, "");
}

TEST(MatrixExpandTest, IncludeMatchingNothingAddsANewCellWithDefaultsForTheRest) {
  const MatrixSpec spec = Expand(std::string(kTwoByTwo) + R"(
[[include]]
policy = "fp16-emulated"
fault = "attn-overflow"
steps = 4

[[include]]
pipeline = "small"
seed = 7
)");
  ASSERT_EQ(spec.cells.size(), 6u);
  const Cell& f2 = spec.cells[4];
  EXPECT_EQ(f2.Label(), "reference:tiny cpu fp16-emulated seed=0 fault=attn-overflow");
  EXPECT_EQ(f2.steps, 4);
  EXPECT_EQ(spec.cells[5].Label(), "reference:small cpu fp32 seed=7");
}

TEST(MatrixExpandTest, IncludeMatchesOnlyTheAxisProductNotEarlierIncludes) {
  // The second include matches no product cell (fault differs), so it is new too.
  const MatrixSpec spec = Expand(std::string(kTwoByTwo) + R"(
[[include]]
policy = "bf16"
fault = "input-fp32"
[[include]]
policy = "bf16"
fault = "time-embed-fp32"
requires = ["bf16"]
)");
  ASSERT_EQ(spec.cells.size(), 6u);
  EXPECT_TRUE(spec.cells[4].requirements.empty());
  EXPECT_EQ(spec.cells[5].requirements, std::vector<std::string>{"bf16"});
}

TEST(MatrixExpandTest, IncludeReAddingAnExcludedCellIsAnErrorNamingBoth) {
  const std::string message = ExpandError(std::string(kTwoByTwo) + R"(
[[exclude]]
policy = "bf16"

[[include]]
policy = "bf16"
seed = 5
)");
  EXPECT_EQ(message,
            "m.toml:11:1: include adds 'reference:tiny cpu bf16 seed=5' but the exclude "
            "at m.toml:8:1 removes it: drop one of the two");
}

TEST(MatrixExpandTest, TwoIncludesAddingTheSameCellIsADuplicate) {
  const std::string message = ExpandError(std::string(kTwoByTwo) + R"(
[[include]]
policy = "fp8e4m3-bf16"
[[include]]
policy = "fp8e4m3-bf16"
requires = ["bf16"]
)");
  EXPECT_EQ(message,
            "m.toml:10:1: include adds 'reference:tiny cpu fp8e4m3-bf16 seed=0', which "
            "is already in the matrix (duplicate cell)");
}

TEST(MatrixExpandTest, XfailMarksMatchingCellsFirstEntryWins) {
  const MatrixSpec spec = Expand(std::string(kTwoByTwo) + R"(
[[xfail]]
policy = "bf16"
seed = 0
reason = "known bf16 drift"
[[xfail]]
policy = "bf16"
reason = "second"
)");
  EXPECT_EQ(spec.cells[0].xfail, "");
  EXPECT_EQ(spec.cells[2].xfail, "known bf16 drift");
  EXPECT_EQ(spec.cells[3].xfail, "second");
  EXPECT_TRUE(spec.cells[2].expected_to_fail());
}

TEST(MatrixExpandTest, TopLevelRequiresToleranceAndSettingsReachEveryCell) {
  const MatrixSpec spec = Expand(R"(
name = "q"
description = "d"
requires = ["cuda"]
repeats = 5
warmup = 2
timeout = 90.5
[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = ["fp32", "fp16-emulated"]
[tolerance]
fp16-emulated = "fp16"
[[include]]
policy = "bf16"
)");
  ASSERT_EQ(spec.cells.size(), 3u);
  EXPECT_EQ(spec.name, "q");
  EXPECT_EQ(spec.description, "d");
  EXPECT_EQ(spec.repeats, 5);
  EXPECT_EQ(spec.warmup, 2);
  EXPECT_DOUBLE_EQ(spec.timeout_seconds, 90.5);
  for (const Cell& c : spec.cells) EXPECT_EQ(c.requirements, std::vector<std::string>{"cuda"});
  EXPECT_EQ(spec.cells[0].tolerance, "");
  EXPECT_EQ(spec.cells[1].tolerance, "fp16");
  EXPECT_EQ(spec.cells[2].policy, "bf16");
  EXPECT_EQ(spec.sha256.size(), 64u);
}

TEST(MatrixExpandTest, CudaIsEveryGpuFoundOrCuda0WhenNoneAndAllIsEveryDeviceFound) {
  const std::string matrix = R"(
[axes]
pipelines = ["tiny"]
devices = ["DEVICES"]
policies = ["fp32"]
)";
  auto with = [&](const std::string& devices, const std::vector<DeviceInfo>& found) {
    std::string text = matrix;
    text.replace(text.find("\"DEVICES\""), 9, devices);
    std::vector<std::string> names;
    for (const Cell& c : Expand(text, found).cells) names.push_back(c.device);
    return names;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(with(R"("cuda")", kTwoGpus), (V{"cuda:0", "cuda:1"}));
  EXPECT_EQ(with(R"("cuda")", kCpuOnly), (V{"cuda:0"}));
  EXPECT_EQ(with(R"("all")", kTwoGpus), (V{"cpu", "cuda:0", "cuda:1"}));
  EXPECT_EQ(with(R"("all")", kCpuOnly), (V{"cpu"}));
  EXPECT_EQ(with(R"("cuda:3", "all", "cpu")", kCpuOnly), (V{"cuda:3", "cpu"}));
}

TEST(MatrixExpandTest, CpuStarIsEveryKernelPathFoundAndAllTakesTheCpuOnce) {
  const std::string matrix = R"(
[axes]
pipelines = ["tiny"]
devices = ["cpu:*", "all", "cpu:avx512"]
policies = ["fp32"]
)";
  const std::vector<DeviceInfo> found = {Device("cpu", "avx2"), Device("cpu:avx2", "avx2"),
                                         Device("cpu:default", "avx2")};
  std::vector<std::string> names;
  for (const Cell& c : Expand(matrix, found).cells) names.push_back(c.device);
  EXPECT_EQ(names, (std::vector<std::string>{"cpu:avx2", "cpu:default", "cpu", "cpu:avx512"}));
  EXPECT_NE(ExpandError(R"(
[axes]
pipelines = ["tiny"]
devices = ["cpu:sse"]
policies = ["fp32"]
)")
                .find("unknown device 'cpu:sse'"),
            std::string::npos);
}

TEST(MatrixExpandTest, EntryDeviceCudaMatchesEveryGpuAndAllAddsOneCellPerDevice) {
  const MatrixSpec spec = Expand(R"(
[axes]
pipelines = ["tiny"]
devices = ["all"]
policies = ["fp32"]
[[exclude]]
device = "cuda"
policy = "fp32"
[[include]]
device = "all"
policy = "bf16"
fault = "input-fp32"
)",
                                 {Device("cpu", ""), Device("cuda:0", "9.0")});
  EXPECT_EQ(Labels(spec), (std::vector<std::string>{"reference:tiny cpu fp32 seed=0",
                                                    "reference:tiny cpu bf16 seed=0 fault=input-fp32",
                                                    "reference:tiny cuda:0 bf16 seed=0 fault=input-fp32"}));
}

TEST(MatrixExpandTest, ModelPackageFoldersResolveAgainstTheMatrixFolder) {
  const TestTempDir temp("fg-matrix-pkg");
  const std::string& dir = temp.path();
  std::filesystem::create_directories(dir + "/models/my-model");
  std::ofstream(dir + "/models/my-model/model.toml") << "name = \"my-model\"\n";
  StatusOr<MatrixSpec> spec = ParseMatrix(R"(
[axes]
pipelines = ["tiny", "models/my-model"]
devices = ["cpu"]
policies = ["fp32"]
)",
                                          dir + "/m.toml", dir, kCpuOnly);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->cells.size(), 2u);
  EXPECT_EQ(spec->cells[1].Pipeline(), "model:my-model");
  EXPECT_EQ(spec->cells[1].model_dir,
            std::filesystem::path(dir + "/models/my-model").lexically_normal().string());
}

TEST(MatrixExpandTest, AMatrixDefinesPoliciesItsCellsCarryTheFileOf) {
  const std::string toml = R"(
[axes]
pipelines = ["tiny"]
devices = ["cpu"]
policies = ["bf16", "mine"]
seeds = [0]

[policy.mine]
based_on = "bf16"
fp32_modules = ["blocks.*.ff"]

[tolerance]
mine = "bf16"
)";
  StatusOr<MatrixSpec> spec = ParseMatrix(toml, "/srv/m.toml", "/srv", {});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->cells.size(), 2u);
  EXPECT_EQ(spec->cells[0].policy_file, "");  // a preset
  EXPECT_EQ(spec->cells[1].policy, "mine");
  EXPECT_EQ(spec->cells[1].policy_file, "/srv/m.toml");
  StatusOr<MatrixSpec> bad = ParseMatrix(
      "[axes]\npipelines = [\"tiny\"]\ndevices = [\"cpu\"]\nseeds = [0]\npolicies = [\"theirs\"]\n", "m.toml",
      "", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("m.toml:5:", 0), 0u) << bad.status().message();
  EXPECT_NE(bad.status().message().find("unknown policy 'theirs'"), std::string::npos);
}

// Duplicate values and cells are found with sets, not by comparing every pair: one axis
// of 100,000 seeds expands (ctest's timeout guards the time; no timing is asserted here).
TEST(MatrixExpandTest, AHundredThousandSeedsExpand) {
  constexpr int kSeeds = 100000;
  std::string seeds;
  for (int i = 0; i < kSeeds; ++i) seeds += (i ? ", " : "") + std::to_string(i);
  const std::string axes = "[axes]\npipelines = [\"tiny\"]\ndevices = [\"cpu\"]\npolicies = [\"fp32\"]\n";
  const MatrixSpec spec = Expand(axes + "seeds = [" + seeds + "]\n");
  ASSERT_EQ(spec.cells.size(), static_cast<size_t>(kSeeds));
  EXPECT_EQ(spec.cells.front().seed, 0u);
  EXPECT_EQ(spec.cells.back().seed, static_cast<uint64_t>(kSeeds - 1));
  std::set<std::string> ids;
  for (const Cell& c : spec.cells) ids.insert(c.Id());
  EXPECT_EQ(ids.size(), static_cast<size_t>(kSeeds));
  // The last value repeating the first is still found.
  const std::string message = ExpandError(axes + "seeds = [" + seeds + ", 0]\n");
  EXPECT_EQ(message.rfind("m.toml:5:", 0), 0u) << message;
  EXPECT_NE(message.find("duplicate value in axis 'seeds'"), std::string::npos) << message;
}

}  // namespace
}  // namespace framegate
