// framegate_package_bench: what watching a user's TorchScript package costs. One package
// cell's generation (its sampler steps with CFG and the decode) with the modules as
// torch::jit::load gives them (plain), instrumented with no observer (a healthy cell by
// default), watching every module and op output for NaN/Inf, with the range probes, and
// with the range probes plus SQNR against FP32 (which needs the FP32 run: included);
// under fp32, bf16 and fp16-emulated (whose instrumented mode is the FP16 emulation by
// dtype propagation).
// Compare medians of one policy measured in the same run (bench/package_table.py,
// docs/benchmarks.md).
//   framegate_package_bench --package DIR [--threads N] [benchmark flags]
#include <benchmark/benchmark.h>
#include <torch/script.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "checks/numeric_probes.h"
#include "harness/build_info.h"
#include "pipelines/model_package.h"
#include "pipelines/pipeline_run.h"
#include "pipelines/sampler.h"

namespace framegate {
namespace {

std::string g_package;

// The package as a user's own loop would run it: no instrumentation, default executor.
class PlainPackage : public VideoModel {
 public:
  PlainPackage(const std::string& dir, const ModelManifest& manifest, c10::ScalarType dtype)
      : manifest_(manifest),
        denoiser_(torch::jit::load(dir + "/denoiser.pt")),
        decoder_(torch::jit::load(dir + "/decoder.pt")),
        dtype_(dtype) {
    denoiser_.eval();
    decoder_.eval();
    denoiser_.to(dtype);
    decoder_.to(dtype);
  }
  const LatentGeometry& geometry() const override { return manifest_.latent; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  c10::ScalarType latent_dtype() const override { return dtype_; }
  at::Tensor PredictNoise(const at::Tensor& x, const at::Tensor& t, const at::Tensor& cond) override {
    return denoiser_.forward({x, t, cond}).toTensor();
  }
  at::Tensor Decode(const at::Tensor& z) override { return decoder_.forward({z}).toTensor(); }

 private:
  ModelManifest manifest_;
  torch::jit::Module denoiser_, decoder_;
  c10::ScalarType dtype_;
};

enum class Mode { kPlain, kInstrumented, kWatch, kRanges, kRangesSqnr };

void BM_PackageCell(benchmark::State& state, const std::string& policy_name, Mode mode) {
  const DtypePolicy policy = *FindPolicy(policy_name);
  const ModelManifest manifest = *ReadModelManifest(g_package);
  std::unique_ptr<VideoModel> model;
  if (mode == Mode::kPlain) {
    model = std::make_unique<PlainPackage>(g_package, manifest, policy.compute);
  } else {
    model = std::move(*LoadModelPackage(g_package, policy, c10::Device(c10::kCPU)));
  }
  std::unique_ptr<VideoModel> fp32;
  if (mode == Mode::kRangesSqnr) {
    fp32 = std::move(*LoadModelPackage(g_package, Fp32Policy(), c10::Device(c10::kCPU)));
  }
  for (auto _ : state) {
    NumericProbes probes(mode == Mode::kRanges || mode == Mode::kRangesSqnr);
    NumericProbes reference(false);
    auto watch = [](NumericProbes& p) {
      return [&p](const ModuleOutput& out) {
        p.Observe(out.module, out.step, out.value, out.value.scalar_type(), out.op);
      };
    };
    if (mode == Mode::kRangesSqnr) {  // the FP32 run the SQNR needs is part of the cost
      reference.KeepOutputsForSqnr();
      fp32->SetObserver(watch(reference));
      benchmark::DoNotOptimize(Generate(*fp32, manifest.sampler, 0).frames.data_ptr());
      probes.CompareWith(&reference);
    }
    if (mode >= Mode::kWatch) model->SetObserver(watch(probes));
    const GenerationResult r = Generate(*model, manifest.sampler, 0);
    benchmark::DoNotOptimize(r.frames.data_ptr());
  }
}

}  // namespace
}  // namespace framegate

int main(int argc, char** argv) {
  using namespace framegate;
  int threads = 1;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--package") == 0 && i + 1 < argc) {
      g_package = argv[++i];
    } else {
      args.push_back(argv[i]);
    }
  }
  if (g_package.empty()) {
    std::fprintf(stderr, "framegate_package_bench: --package DIR is required\n");
    return 2;
  }
  ConfigureThreads(threads);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("package", g_package);
  const std::pair<Mode, const char*> modes[] = {{Mode::kPlain, "plain"},
                                                {Mode::kInstrumented, "instrumented"},
                                                {Mode::kWatch, "watch"},
                                                {Mode::kRanges, "ranges"},
                                                {Mode::kRangesSqnr, "ranges+sqnr"}};
  for (const char* policy : {"fp32", "bf16", "fp16-emulated"}) {
    for (const auto& [mode, name] : modes) {
      benchmark::RegisterBenchmark(("BM_PackageCell/" + std::string(policy) + "/" + name).c_str(),
                                   BM_PackageCell, std::string(policy), mode)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5)
          ->Repetitions(7)
          ->ReportAggregatesOnly(true);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
