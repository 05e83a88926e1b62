// Device discovery on this host, checked against /proc itself, and the unsupported-here
// rules of matrix/unsupported.h on described hosts.
#include "matrix/device_discovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/torch_version.h"
#include "matrix/matrix_spec.h"
#include "matrix/unsupported.h"

namespace framegate {
namespace {

// The first "flags" line of /proc/cpuinfo as a set.
std::set<std::string> ProcCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  return flags;
}

TEST(DeviceDiscoveryTest, TheCpuComesFirstWithFeaturesFromProcCpuinfo) {
  const HostDevices host = DiscoverHost();
  ASSERT_FALSE(host.devices.empty());
  const DeviceInfo& cpu = host.devices.front();
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_FALSE(cpu.name.empty());
  EXPECT_GT(cpu.memory_bytes, int64_t{256} << 20);
  EXPECT_GE(host.cpu_cores, 1);
  const std::set<std::string> flags = ProcCpuFlags();
  for (const std::string& f : host.cpu_features) {
    EXPECT_TRUE(flags.count(f)) << f;
    EXPECT_TRUE(HasCpuFeature(cpu, f)) << f;
  }
  for (const char* f : {"avx2", "avx512f", "avx512_bf16", "amx_bf16"})
    EXPECT_EQ(HasCpuFeature(cpu, f), flags.count(f) > 0) << f;
  std::vector<std::string> flag_list(flags.begin(), flags.end());
  const std::vector<std::string> paths = CpuKernelPaths(flag_list);
  ASSERT_LT(paths.size(), host.devices.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(host.devices[i + 1].device, "cpu:" + paths[i]);
    EXPECT_EQ(host.devices[i + 1].capability, cpu.capability);
  }
  const size_t first_gpu = 1 + paths.size();
  if (!host.built_with_cuda) {
    EXPECT_EQ(host.devices.size(), first_gpu);
    EXPECT_EQ(host.cuda_runtime, "");
  }
  for (size_t i = first_gpu; i < host.devices.size(); ++i)
    EXPECT_EQ(host.devices[i].device, "cuda:" + std::to_string(i - first_gpu));
  EXPECT_EQ(FindDevice(host.devices, "cpu"), &host.devices.front());
  EXPECT_EQ(FindDevice(host.devices, "cuda:99"), nullptr);
}

TEST(DeviceDiscoveryTest, GpuCapabilityReadsMajorMinor) {
  EXPECT_EQ(GpuCapability(DeviceInfo{"cuda:0", "A100", "8.0", 0, ""}), 80);
  EXPECT_EQ(GpuCapability(DeviceInfo{"cuda:1", "L4", "8.9", 0, ""}), 89);
  EXPECT_EQ(GpuCapability(DeviceInfo{"cpu", "x", "avx2", 0, ""}), 0);
}

TEST(DeviceDiscoveryTest, KernelPathsFollowAtensFlagRequirements) {
  using V = std::vector<std::string>;
  EXPECT_EQ(CpuKernelPaths({}), (V{"default"}));
  EXPECT_EQ(CpuKernelPaths({"sse4_2", "avx2"}), (V{"default"}));  // avx2 needs fma too
  EXPECT_EQ(CpuKernelPaths({"avx2", "fma"}), (V{"avx2", "default"}));
  EXPECT_EQ(CpuKernelPaths({"avx2", "fma", "avx512f", "avx512bw", "avx512vl"}),
            (V{"avx2", "default"}));  // no avx512dq
  EXPECT_EQ(CpuKernelPaths({"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}),
            (V{"avx512", "avx2", "default"}));
  EXPECT_EQ(CpuKernelPathOf("cpu:avx2"), "avx2");
  EXPECT_EQ(CpuKernelPathOf("cpu:default"), "default");
  EXPECT_EQ(CpuKernelPathOf("cpu"), "");
  EXPECT_EQ(CpuKernelPathOf("cpu:*"), "");
  EXPECT_EQ(CpuKernelPathOf("cpu:sse"), "");
  EXPECT_EQ(CpuKernelPathOf("cuda:0"), "");
}

const DeviceInfo kPlainCpu{"cpu", "Old CPU", "avx2 avx512f", 0, ""};
const DeviceInfo kBf16Cpu{"cpu", "Sapphire Rapids", "avx2 avx512f avx512_bf16 amx_bf16", 0, ""};
const DeviceInfo kAmpere{"cuda:0", "A100", "8.0", 0, "535"};
const DeviceInfo kVolta{"cuda:1", "V100", "7.0", 0, "535"};

// The reason, or "(error: ...)" when the cell's policy could not be resolved.
std::string ReasonOf(const Cell& cell, const std::vector<DeviceInfo>& found) {
  StatusOr<std::string> reason = UnsupportedReason(cell, found);
  return reason.ok() ? *reason : "(error: " + reason.status().message() + ")";
}

Cell On(const std::string& device, const std::string& policy, std::vector<std::string> requirements = {}) {
  Cell c;
  c.device = device;
  c.policy = policy;
  c.requirements = std::move(requirements);
  return c;
}

TEST(UnsupportedReasonTest, RunnableCellsHaveNoReason) {
  EXPECT_EQ(ReasonOf(On("cpu", "fp32"), {kPlainCpu}), "");
  EXPECT_EQ(ReasonOf(On("cpu", "bf16"), {kPlainCpu}), "");  // emulated bf16 runs
  EXPECT_EQ(ReasonOf(On("cpu", "fp16-emulated"), {kPlainCpu}), "");
  EXPECT_EQ(ReasonOf(On("cpu", "bf16", {"bf16"}), {kBf16Cpu}), "");
  EXPECT_EQ(ReasonOf(On("cuda:0", "fp16", {"cuda", "bf16", "tf32", "fp16"}), {kPlainCpu, kAmpere}), "");
}

TEST(UnsupportedReasonTest, MissingDevice) {
  EXPECT_EQ(ReasonOf(On("cuda:0", "fp32"), {kPlainCpu}), "device cuda:0 not found on this host (found: cpu)");
  EXPECT_EQ(ReasonOf(On("cuda:2", "fp32"), {kPlainCpu, kAmpere, kVolta}),
            "device cuda:2 not found on this host (found: cpu, cuda:0, cuda:1)");
}

TEST(UnsupportedReasonTest, KernelPathTheCpuLacks) {
  DeviceInfo avx2 = kPlainCpu, fallback = kPlainCpu;
  avx2.device = "cpu:avx2";
  fallback.device = "cpu:default";
  const std::vector<DeviceInfo> found = {kPlainCpu, avx2, fallback};
  EXPECT_EQ(ReasonOf(On("cpu:avx2", "fp32"), found), "");
  EXPECT_EQ(ReasonOf(On("cpu:avx512", "fp32"), found),
            "device cpu:avx512: this CPU lacks ATen's avx512 kernel path (needs avx512f "
            "avx512bw avx512vl avx512dq; kernel paths found: cpu:avx2, cpu:default)");
  EXPECT_EQ(ReasonOf(On("cuda:0", "fp32"), found), "device cuda:0 not found on this host (found: cpu)");
}

TEST(UnsupportedReasonTest, UnmetRequirements) {
  EXPECT_EQ(ReasonOf(On("cpu", "fp32", {"cuda"}), {kPlainCpu}), "requires cuda but runs on cpu");
  EXPECT_EQ(ReasonOf(On("cpu", "bf16", {"bf16"}), {kPlainCpu}),
            "requires bf16: cpu (Old CPU) has no native BF16 (needs avx512_bf16 or amx_bf16)");
  EXPECT_EQ(ReasonOf(On("cuda:1", "bf16", {"cuda", "bf16"}), {kPlainCpu, kVolta}),
            "requires bf16: cuda:1 (capability 7.0) has no native BF16 (needs capability >= 8.0)");
  EXPECT_EQ(ReasonOf(On("cuda:0", "fp8e4m3-bf16", {"fp8"}), {kAmpere}),
            "requires fp8: cuda:0 (capability 8.0) has no FP8 tensor cores (needs a GPU with "
            "capability >= 8.9)");
  EXPECT_EQ(ReasonOf(On("cuda:1", "tf32", {"tf32"}), {kVolta}),
            "requires tf32: cuda:1 (capability 7.0) has no TF32 (needs a GPU with capability >= 8.0)");
}

// Whatever the CPU's features: unsupported where LibTorch has no FP16 convolution/matmul
// on the CPU (1.13), a runnable cell where it has them (2.2 on).
TEST(UnsupportedReasonTest, Fp16ComputeOnTheCpuRunsExactlyWhereLibTorchHasFp16Kernels) {
  for (const char* policy : {"fp16", "fp16-fp32norm", "fp16-reduced-accum"}) {
    const std::string reason = ReasonOf(On("cpu", policy), {kBf16Cpu});
    if (kCpuHasFp16Compute) {
      EXPECT_EQ(reason, "") << policy;
      continue;
    }
    EXPECT_EQ(reason.rfind(std::string("policy ") + policy + " computes in fp16: LibTorch " TORCH_VERSION, 0),
              0u)
        << reason;
    EXPECT_NE(reason.find("no FP16 convolution/matmul on the CPU"), std::string::npos);
  }
  EXPECT_EQ(ReasonOf(On("cuda:0", "fp16"), {kAmpere}), "");
}

// A cell whose policy cannot be resolved is an error, never an UNSUPPORTED reason (which
// would count as passing), whatever its device.
TEST(UnsupportedReasonTest, APolicyLookupErrorIsAnErrorNotAReason) {
  Cell cell = On("cpu", "mine");
  cell.policy_file = ::testing::TempDir() + "/fg_no_such_policies_" + std::to_string(::getpid()) + ".toml";
  StatusOr<std::string> reason = UnsupportedReason(cell, {kPlainCpu});
  ASSERT_FALSE(reason.ok()) << *reason;
  EXPECT_EQ(reason.status().code(), Status::Code::kNotFound);
  cell.device = "cuda:7";  // a missing device does not hide it
  EXPECT_FALSE(UnsupportedReason(cell, {kPlainCpu}).ok());
  EXPECT_FALSE(UnsupportedReason(On("cpu", "fp61"), {kPlainCpu}).ok());
}

// A loaded matrix has resolved its cells' policies: its file vanishing afterwards changes
// nothing (the runner does not read it again).
TEST(UnsupportedReasonTest, AMatrixsOwnPoliciesResolveAfterItsFileIsGone) {
  const std::string path = ::testing::TempDir() + "/fg_policy_matrix_" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path) << "[axes]\npipelines = [\"tiny\"]\ndevices = [\"cpu\"]\npolicies = [\"mine\"]\n"
                         "[policy.mine]\nbased_on = \"fp16\"\n";
  StatusOr<MatrixSpec> spec = LoadMatrix(path, {kPlainCpu});
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->cells.size(), 1u);
  std::remove(path.c_str());
  StatusOr<std::string> reason = UnsupportedReason(spec->cells[0], {kPlainCpu});
  ASSERT_TRUE(reason.ok()) << reason.status().message();
  if (kCpuHasFp16Compute) {
    EXPECT_EQ(*reason, "");  // resolved, and FP16 runs on this LibTorch's CPU
  } else {
    EXPECT_EQ(reason->rfind("policy mine computes in fp16", 0), 0u) << *reason;  // based on fp16
  }
}

}  // namespace
}  // namespace framegate
