// The shipped matrices parse, their compiled-in copies equal the files, and they expand
// to the cells docs/matrix.md describes on a CPU-only host and on a two-GPU host.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "harness/torch_version.h"
#include "matrix/matrix_spec.h"
#include "matrix/unsupported.h"

namespace framegate {
namespace {

const std::vector<DeviceInfo> kCpuOnly = {DeviceInfo{"cpu", "Test CPU", "avx2 avx512_bf16", 0, ""}};
const std::vector<DeviceInfo> kTwoGpus = {DeviceInfo{"cpu", "Test CPU", "avx2", 0, ""},
                                          DeviceInfo{"cuda:0", "A100", "8.0", 0, "535.1"},
                                          DeviceInfo{"cuda:1", "V100", "7.0", 0, "535.1"}};

MatrixSpec Load(const std::string& name, const std::vector<DeviceInfo>& found) {
  StatusOr<MatrixSpec> spec = LoadMatrix(name, found);
  EXPECT_TRUE(spec.ok()) << name << ": " << spec.status().ToString();
  return spec.ok() ? *spec : MatrixSpec();
}

// The reason, or "(error: ...)" when the cell's policy could not be resolved.
std::string ReasonOf(const Cell& cell, const std::vector<DeviceInfo>& found) {
  StatusOr<std::string> reason = UnsupportedReason(cell, found);
  return reason.ok() ? *reason : "(error: " + reason.status().message() + ")";
}

int CountIf(const MatrixSpec& spec, const std::function<bool(const Cell&)>& pred) {
  return static_cast<int>(std::count_if(spec.cells.begin(), spec.cells.end(), pred));
}

TEST(ShippedMatricesTest, EveryFileParsesAndEqualsItsCompiledInCopy) {
  ASSERT_EQ(ShippedMatrixNames(),
            (std::vector<std::string>{"kernel-paths", "local", "nightly", "qualification", "smoke"}));
  for (const std::string& name : ShippedMatrixNames()) {
    const std::string path = std::string(FRAMEGATE_SOURCE_DIR) + "/matrix/" + name + ".toml";
    const MatrixSpec file = Load(path, kTwoGpus);
    const MatrixSpec compiled = Load(name, kTwoGpus);
    EXPECT_EQ(file.source, path);
    EXPECT_EQ(compiled.source, "matrix/" + name + ".toml");
    EXPECT_EQ(file.sha256, compiled.sha256) << name << ": rebuild to refresh the compiled-in copy";
    EXPECT_EQ(file.name, name);
    EXPECT_FALSE(file.cells.empty());
    EXPECT_GT(file.timeout_seconds, 0) << name;
    EXPECT_EQ(Load("matrix/" + name + ".toml", kTwoGpus).sha256, compiled.sha256);
  }
}

TEST(ShippedMatricesTest, LocalIsEveryDeviceFoundTimesTheMainPolicies) {
  const MatrixSpec cpu = Load("local", kCpuOnly);
  ASSERT_EQ(cpu.cells.size(), 5u);
  std::vector<std::string> policies;
  for (const Cell& c : cpu.cells) {
    policies.push_back(c.policy);
    EXPECT_EQ(c.Pipeline(), "reference:tiny");
    EXPECT_EQ(c.device, "cpu");
    EXPECT_EQ(c.seed, 0u);
  }
  EXPECT_EQ(policies, (std::vector<std::string>{"fp32", "bf16", "fp16", "fp16-emulated", "fp8e4m3-bf16"}));
  EXPECT_EQ(Load("local", kTwoGpus).cells.size(), 15u);
  // Here (a CPU without CUDA) every cell runs but the FP16-compute one where LibTorch has
  // no FP16 kernels on the CPU.
  for (const Cell& c : cpu.cells)
    EXPECT_EQ(ReasonOf(c, kCpuOnly).empty(), c.policy != "fp16" || kCpuHasFp16Compute) << c.Label();
}

TEST(ShippedMatricesTest, SmokeIsTenTinyCpuCellsWithTheFiveFaultCasesExpectedToFail) {
  const MatrixSpec smoke = Load("smoke", kTwoGpus);
  ASSERT_EQ(smoke.cells.size(), 10u);
  EXPECT_EQ(CountIf(smoke, [](const Cell& c) { return c.device == "cpu" && c.size == "tiny"; }), 10);
  EXPECT_EQ(CountIf(smoke, [](const Cell& c) { return !c.fault.empty() && c.expected_to_fail(); }), 5);
  EXPECT_EQ(CountIf(smoke, [](const Cell& c) { return c.fault.empty() && !c.expected_to_fail(); }), 5);
  for (const Cell& c : smoke.cells) {
    const std::map<std::string, std::string> policy_of_fault = {{"", c.policy},
                                                                {"time-embed-fp32", "bf16"},
                                                                {"attn-overflow", "fp16-emulated"},
                                                                {"activation-overflow", "fp16-emulated"},
                                                                {"input-fp32", "bf16"},
                                                                {"fp8-no-upcast", "fp8e4m3-bf16"}};
    EXPECT_EQ(c.policy, policy_of_fault.at(c.fault)) << c.Label();
  }
}

TEST(ShippedMatricesTest, NightlyIsTinyAndSmallEveryPolicyThreeSeedsPlusFaults) {
  // CPU: 2 sizes x 9 policies x 3 seeds, less tf32 and fp16-reduced-accum (12), + 5 faults.
  const MatrixSpec cpu = Load("nightly", kCpuOnly);
  EXPECT_EQ(cpu.cells.size(), 2u * 9 * 3 - 12 + 5);
  EXPECT_EQ(CountIf(cpu, [](const Cell& c) { return c.policy == "tf32"; }), 0);
  // Two GPUs add 2 x 9 x 3 cells and 5 fault cells each.
  const MatrixSpec gpus = Load("nightly", kTwoGpus);
  EXPECT_EQ(gpus.cells.size(), cpu.cells.size() + 2 * (54 + 5));
  EXPECT_EQ(CountIf(gpus, [](const Cell& c) { return c.policy == "tf32"; }), 12);
}

TEST(ShippedMatricesTest, QualificationIsLargeOnGpusAndUnsupportedWithoutOne) {
  const MatrixSpec cpu = Load("qualification", kCpuOnly);
  ASSERT_EQ(cpu.cells.size(), 16u);
  EXPECT_EQ(cpu.repeats, 5);
  EXPECT_EQ(cpu.warmup, 2);
  for (const Cell& c : cpu.cells) {
    EXPECT_EQ(c.size, "large");
    EXPECT_EQ(c.device, "cuda:0");
    EXPECT_EQ(c.requirements.front(), "cuda");
    EXPECT_EQ(ReasonOf(c, kCpuOnly), "device cuda:0 not found on this host (found: cpu)");
  }
  const MatrixSpec gpus = Load("qualification", kTwoGpus);
  ASSERT_EQ(gpus.cells.size(), 32u);
  // The V100 (7.0) has no native BF16 or TF32: those cells are UNSUPPORTED on it.
  std::vector<std::string> unsupported_on_v100;
  for (const Cell& c : gpus.cells) {
    const std::string reason = ReasonOf(c, kTwoGpus);
    if (c.device == "cuda:0") {
      EXPECT_EQ(reason, "") << c.Label();
    }
    if (c.device == "cuda:1" && c.seed == 0 && !reason.empty()) unsupported_on_v100.push_back(c.policy);
  }
  EXPECT_EQ(unsupported_on_v100, (std::vector<std::string>{"tf32", "bf16", "fp8e4m3-bf16", "fp8e5m2-bf16"}));
}

}  // namespace
}  // namespace framegate
