// framegate_probes_bench: what the numeric probes cost. One tiny cell (the whole pipeline:
// 8 DDIM steps with CFG and the decode) with no observer, with NaN localisation only, and
// with the full range probes, under fp32, tf32, fp16-emulated and fp16-emulated-fp16-accum
// (the last two differ only in the FP16 accumulation emulated on the CPU). Compare the medians of the
// three variants of one policy measured in the same run (docs/benchmarks.md).
//   framegate_probes_bench [--threads N] [benchmark flags]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "checks/frame_health.h"
#include "checks/numeric_probes.h"
#include "harness/build_info.h"
#include "pipelines/pipeline_run.h"

namespace framegate {
namespace {

enum class Probes { kOff, kLocalise, kRanges };

void BM_TinyCell(benchmark::State& state, const std::string& policy, Probes mode) {
  PipelineSpec spec;
  spec.size = "tiny";
  spec.policy = *FindPolicy(policy);
  for (auto _ : state) {
    NumericProbes probes(mode == Probes::kRanges);
    ModuleObserver on_module;
    StepObserver on_step;
    std::vector<NonfiniteCount> steps;
    if (mode != Probes::kOff) {
      const bool emulated = spec.policy.emulate_fp16;
      on_module = [&](const ModuleOutput& out) {
        probes.Observe(out.module, out.step, out.value, emulated ? c10::kHalf : out.value.scalar_type());
      };
      on_step = [&](int, const at::Tensor& latents) { steps.push_back(CountNonfinite(latents)); };
    }
    StatusOr<PipelineOutcome> outcome = RunPipeline(spec, on_module, on_step);
    if (!outcome.ok() || outcome->kind != RunEnd::kFinished) {
      state.SkipWithError("the tiny cell did not finish");
      return;
    }
    benchmark::DoNotOptimize(outcome->result.frames.data_ptr());
  }
}

}  // namespace
}  // namespace framegate

int main(int argc, char** argv) {
  using namespace framegate;
  int threads = 1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
  }
  ConfigureThreads(threads);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  const std::pair<Probes, const char*> modes[] = {
      {Probes::kOff, "off"}, {Probes::kLocalise, "localise"}, {Probes::kRanges, "ranges"}};
  for (const char* policy : {"fp32", "tf32", "fp16-emulated", "fp16-emulated-fp16-accum"}) {
    for (const auto& [mode, name] : modes) {
      benchmark::RegisterBenchmark(("BM_TinyCell/" + std::string(policy) + "/probes:" + name).c_str(),
                                   BM_TinyCell, std::string(policy), mode)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1)
          ->Repetitions(7)
          ->ReportAggregatesOnly(true);
    }
  }
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0) {
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
