// Every malformed matrix gives one line naming the file, the line:column and the problem.
// The bad matrices are written to real files and read through LoadMatrix.
#include "matrix/matrix_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "harness/test_temp_dir.h"

namespace framegate {
namespace {

const std::vector<DeviceInfo> kCpuOnly = {DeviceInfo{"cpu", "Test CPU", "avx2", 0, ""}};

// Writes `toml` to a file, loads it, removes it, and returns the error with the file's
// path shown as "bad.toml". The file name holds the process id: CTest runs tests side by
// side.
std::string ErrorOf(const std::string& toml) {
  static int counter = 0;
  const std::string path = ::testing::TempDir() + "/fg_bad_matrix_" + std::to_string(::getpid()) + "_" +
                           std::to_string(++counter) + ".toml";
  std::ofstream(path) << toml;
  StatusOr<MatrixSpec> spec = LoadMatrix(path, kCpuOnly);
  std::remove(path.c_str());
  if (spec.ok()) return "(no error)";
  EXPECT_EQ(spec.status().code(), Status::Code::kInvalidInput);
  std::string message = spec.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  if (message.rfind(path, 0) == 0) message.replace(0, path.size(), "bad.toml");
  return message;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  const bool starts = text.rfind(prefix, 0) == 0;
  if (!starts) ADD_FAILURE() << "'" << text << "' does not start with '" << prefix << "'";
  return starts;
}

const std::string kAxes = "[axes]\npipelines = [\"tiny\"]\ndevices = [\"cpu\"]\n";  // lines 1-3

TEST(MatrixErrorsTest, UnknownKeysListTheKnownOnes) {
  EXPECT_EQ(ErrorOf(kAxes + "polices = [\"fp32\"]\n"),
            "bad.toml:4:1: unknown key 'polices' in [axes] (known: pipelines, devices, policies, "
            "seeds, faults, samplers, steps, guidance)");
  EXPECT_EQ(ErrorOf("repeat = 3\n" + kAxes + "policies = [\"fp32\"]\n"),
            "bad.toml:1:1: unknown key 'repeat' in the matrix (known: name, description, repeats, "
            "warmup, timeout, requires, axes, tolerance, policy, include, exclude, xfail)");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[include]]\npolicy = \"bf16\"\n  reqires = []\n"),
            "bad.toml:7:3: unknown key 'reqires' in [[include]] (known: pipeline, device, policy, "
            "seed, fault, sampler, steps, guidance, requires, tolerance)");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[exclude]]\ntolerance = \"x\"\n"),
            "bad.toml:6:1: unknown key 'tolerance' in [[exclude]] (known: pipeline, device, "
            "policy, seed, fault, sampler, steps, guidance)");
}

TEST(MatrixErrorsTest, WrongTypes) {
  EXPECT_EQ(ErrorOf(kAxes + "policies = \"fp32\"\n"),
            "bad.toml:4:12: axis 'policies' must be an array, not string");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\nseeds = [0, \"1\"]\n"),
            "bad.toml:5:13: seed must be an integer >= 0, not string");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\nseeds = [-1]\n"),
            "bad.toml:5:10: seed must be an integer >= 0");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\nsteps = [8, 0]\n"),
            "bad.toml:5:13: steps must be an integer from 1 to 10000");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\nsteps = [8.5]\n"),
            "bad.toml:5:10: steps must be an integer from 1 to 10000, not floating-point");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\nguidance = [0.5]\n"),
            "bad.toml:5:13: guidance must be a number from 1 to 100");
  EXPECT_EQ(ErrorOf("repeats = 0\n" + kAxes + "policies = [\"fp32\"]\n"),
            "bad.toml:1:11: repeats must be an integer from 1 to 10000");
  EXPECT_EQ(ErrorOf("timeout = \"10s\"\n" + kAxes + "policies = [\"fp32\"]\n"),
            "bad.toml:1:11: timeout must be a number of seconds > 0 and <= 604800, not string");
  EXPECT_EQ(ErrorOf("axes = 3\n"), "bad.toml:1:8: axes must be a table ([axes])");
  EXPECT_EQ(ErrorOf("include = [1]\n" + kAxes + "policies = [\"fp32\"]\n"),
            "bad.toml:1:12: include entries must be tables, not integer");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[include]]\nrequires = \"cuda\"\n"),
            "bad.toml:6:12: requires must be an array of strings, not string");
}

// The bounds of harness/number_limits.h, the CLI's too: NaN and infinities never pass.
TEST(MatrixErrorsTest, NumbersHaveTheCommandLinesBounds) {
  const std::string policies = kAxes + "policies = [\"fp32\"]\n";
  EXPECT_EQ(ErrorOf(policies + "guidance = [nan]\n"),
            "bad.toml:5:13: guidance must be a number from 1 to 100");
  EXPECT_EQ(ErrorOf(policies + "guidance = [7.5, inf]\n"),
            "bad.toml:5:18: guidance must be a number from 1 to 100");
  EXPECT_EQ(ErrorOf(policies + "guidance = [1000]\n"),
            "bad.toml:5:13: guidance must be a number from 1 to 100");
  EXPECT_EQ(ErrorOf(policies + "steps = [10001]\n"),
            "bad.toml:5:10: steps must be an integer from 1 to 10000");
  EXPECT_EQ(ErrorOf("timeout = nan\n" + policies),
            "bad.toml:1:11: timeout must be a number of seconds > 0 and <= 604800");
  EXPECT_EQ(ErrorOf("timeout = inf\n" + policies),
            "bad.toml:1:11: timeout must be a number of seconds > 0 and <= 604800");
  EXPECT_EQ(ErrorOf("warmup = 10001\n" + policies),
            "bad.toml:1:10: warmup must be an integer from 0 to 10000");
  EXPECT_EQ(ErrorOf(policies + "[[include]]\nguidance = -inf\n"),
            "bad.toml:6:12: guidance must be a number from 1 to 100");
  EXPECT_EQ(ErrorOf("timeout = 0.5\n" + policies + "guidance = [1, 100]\n"), "(no error)");
}

// Policy and pipeline names end up in folder names and command lines: only
// [A-Za-z0-9._+-], 1 to 64 characters, not "." or "..".
TEST(MatrixErrorsTest, NamesThatCouldHurtAreRefusedWhereTheyAreWritten) {
  const std::string rule = "' must be 1 to 64 characters of A-Z a-z 0-9 . _ + - (not . or ..)";
  EXPECT_EQ(
      ErrorOf(kAxes + "policies = [\"fp32\"]\n[policy.\"/../../../tmp/victim\"]\nbased_on = \"fp32\"\n"),
      "bad.toml:5:9: policy name '/../../../tmp/victim" + rule);
  EXPECT_EQ(
      ErrorOf(kAxes + "policies = [\"fp32\"]\n[policy.\"half emu $(touch PWNED)\"]\nstorage = \"fp32\"\n"),
      "bad.toml:5:9: policy name 'half emu $(touch PWNED)" + rule);
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[policy.\"..\"]\n"),
            "bad.toml:5:9: policy name '.." + rule);
  const std::string long_name(250, 'p');
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[policy." + long_name + "]\n"),
            "bad.toml:5:9: policy name '" + std::string(64, 'p') + "... (250 characters)" + rule);
  // A model package folder's name is the pipeline's name.
  const TestTempDir temp("fg-pkg");
  const std::string dir = temp / "a b";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/model.toml") << "name = \"ab\"\n";
  EXPECT_EQ(ErrorOf("[axes]\npipelines = [\"" + dir + "\"]\ndevices = [\"cpu\"]\npolicies = [\"fp32\"]\n"),
            "bad.toml:2:14: pipeline name 'a b" + rule);
}

TEST(MatrixErrorsTest, FallbackCyclesAreRefusedWhenTheMatrixIsRead) {
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"loop\"]\n[policy.loop]\nbased_on = \"fp16-emulated\"\n"
                            "fallback = \"loop\"\n"),
            "bad.toml:7:12: policy 'loop': fallback cycle loop -> loop (`run --fallback` would never end)");
  EXPECT_EQ(
      ErrorOf(kAxes + "policies = [\"a\"]\n[policy.a]\nfallback = \"b\"\n[policy.b]\nfallback = \"a\"\n"),
      "bad.toml:6:12: policy 'a': fallback cycle a -> b -> a (`run --fallback` would never end)");
}

TEST(MatrixErrorsTest, EmptyAndMissingAxes) {
  EXPECT_EQ(ErrorOf(kAxes + "policies = []\n"), "bad.toml:4:12: axis 'policies' is empty");
  EXPECT_EQ(ErrorOf(kAxes), "bad.toml:1:1: [axes] needs 'policies'");
  EXPECT_EQ(ErrorOf("name = \"x\"\n"), "bad.toml:1:1: the matrix needs an [axes] table");
}

TEST(MatrixErrorsTest, UnknownValuesPointAtTheValue) {
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\", \"fp61\"]\n"),
            "bad.toml:4:21: unknown policy 'fp61' (known: bf16, fp16, fp16-emulated, "
            "fp16-emulated-fp16-accum, fp16-fp32norm, fp16-reduced-accum, fp32, fp8e4m3-bf16, "
            "fp8e5m2-bf16, tf32)");
  EXPECT_EQ(ErrorOf("[axes]\npipelines = [\"huge\"]\n"),
            "bad.toml:2:14: unknown pipeline 'huge' (a size: tiny, small, large; or a model "
            "package folder)");
  EXPECT_TRUE(StartsWith(ErrorOf("[axes]\npipelines = [\"no/such/pkg\"]\n"),
                         "bad.toml:2:14: model package folder 'no/such/pkg' (/"));
  EXPECT_EQ(ErrorOf("[axes]\npipelines = [\"tiny\"]\ndevices = [\"cpu\", \"tpu\"]\n"),
            "bad.toml:3:19: unknown device 'tpu' (known: cpu, cpu:avx512, cpu:avx2, cpu:default, "
            "cpu:* = every CPU kernel path found, cuda:N, cuda = every GPU found, "
            "all = every device found)");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[include]]\nfault = \"melt\"\n"),
            "bad.toml:6:9: unknown fault case 'melt' (known: none, time-embed-fp32, "
            "attn-overflow, attn-fp16-accum, activation-overflow, input-fp32, fp8-no-upcast)");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\nsamplers = [\"heun\"]\n"),
            "bad.toml:5:13: unknown sampler 'heun' (known: ddim, euler)");
  EXPECT_EQ(ErrorOf("requires = [\"cuda\", \"tpu\"]\n" + kAxes + "policies = [\"fp32\"]\n"),
            "bad.toml:1:21: unknown requirement 'tpu' (known: cuda, bf16, fp16, tf32, fp8)");
  EXPECT_TRUE(StartsWith(ErrorOf(kAxes + "policies = [\"fp32\"]\n[tolerance]\nfp32 = \"tight\"\n"),
                         "bad.toml:6:8: unknown tolerance profile 'tight' (known: "));
  EXPECT_TRUE(StartsWith(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[include]]\ntolerance = 3\n"),
                         "bad.toml:6:13: a tolerance profile must be a string, not integer"));
  EXPECT_TRUE(StartsWith(ErrorOf(kAxes + "policies = [\"fp32\"]\n[tolerance]\nfp61 = \"x\"\n"),
                         "bad.toml:6:1: [tolerance]: unknown policy 'fp61' (known: bf16,"));
}

TEST(MatrixErrorsTest, EntriesNeedWhatTheyAreFor) {
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[xfail]]\npolicy = \"fp32\"\n"),
            "bad.toml:5:1: [[xfail]] needs a reason");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[exclude]]\n"),
            "bad.toml:5:1: [[exclude]] needs at least one of pipeline, device, policy, seed, "
            "fault, sampler, steps, guidance");
}

TEST(MatrixErrorsTest, DuplicatesAreErrors) {
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\", \"bf16\", \"fp32\"]\n"),
            "bad.toml:4:29: duplicate value in axis 'policies'");
  EXPECT_EQ(ErrorOf(kAxes + "policies = [\"fp32\"]\n[[include]]\nseed = 2\n[[include]]\nseed = 2\n"),
            "bad.toml:7:1: include adds 'reference:tiny cpu fp32 seed=2', which is already in "
            "the matrix (duplicate cell)");
}

TEST(MatrixErrorsTest, TomlSyntaxErrorsKeepTheirPosition) {
  const std::string message = ErrorOf(kAxes + "policies = [\"fp32\"\n");
  EXPECT_TRUE(std::regex_match(message, std::regex("bad\\.toml:[45]:[0-9]+: .+"))) << message;
}

TEST(MatrixErrorsTest, MissingFileIsNotFoundNamingTheShippedMatrices) {
  StatusOr<MatrixSpec> spec = LoadMatrix("no/such/matrix.toml", kCpuOnly);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(spec.status().message(),
            "no/such/matrix.toml: no such matrix file (shipped matrices: kernel-paths, local, nightly, "
            "qualification, smoke)");
}

}  // namespace
}  // namespace framegate
