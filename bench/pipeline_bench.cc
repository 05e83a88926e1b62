// pipeline_bench: Google Benchmark timings of the reference pipeline on this machine, one
// denoiser step and one decode per reference size, beside a large FP32 matmul that stands
// for what this machine's BLAS can reach. bench/pipeline_table.py turns its JSON output
// into the table of docs/benchmarks.md.
//
//   BM_MatmulFp32/2048      at::mm of two [2048, 2048] float32 matrices
//   BM_DenoiserStep/<size>  one PredictNoise at the size's sampler batch (2 with CFG), FP32
//   BM_Decode/<size>        one Decode of latents [1, C, T, h, w] (T frames), FP32
//
// Counters: GFLOP/s (analytic FLOPs from pipelines/flop_count.h over wall time), frames/s
// (decode), flops / batch / steps / frames (the size's figures, for the table script) and
// peak_rss_bytes, this process's peak resident set during the benchmark's timed runs
// (the peak is reset before each benchmark where Linux allows it; otherwise it is the
// process's peak so far). Times are wall-clock (UseRealTime): LibTorch runs on a thread
// pool, so the main thread's CPU time would undercount.
//
// Sizes: tiny and small when they fit the device's available memory; large only with
// FRAMEGATE_BENCH_LARGE=1 as well (it is meant for GPUs). Environment:
//   FRAMEGATE_THREADS=N        intra-op threads (default: every core this process may use)
//   FRAMEGATE_BENCH_LARGE=1    also register large, if it fits
//   FRAMEGATE_BENCH_DEVICE=D   device to run on (default cpu; others need a build for them)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <ATen/Functions.h>
#include <c10/util/Exception.h>

#include "harness/build_info.h"
#include "harness/device_sync.h"
#include "harness/memory_info.h"
#include "pipelines/flop_count.h"
#include "pipelines/reference_model.h"
#include "pipelines/sampler.h"

namespace framegate {
namespace {

constexpr double kMinSeconds = 0.5;  // per repetition; a small step runs once
constexpr int64_t kMatmulSize = 2048;
constexpr double kTimestep = 500.0;

std::string EnvString(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// Resets this process's VmHWM to its current RSS (Linux >= 4.0). Returns false where the
// kernel does not allow it; the peaks reported are then cumulative.
bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

// The model being benchmarked, one size at a time: a size's step and decode share it,
// and the previous size's weights are freed before the next size is measured.
struct BenchModel {
  std::string size_name;
  std::unique_ptr<ReferenceModel> model;
  at::Tensor x, t, cond;  // CFG batch: [B, C, T, h, w], [B], [B, L, D]
  at::Tensor latents;     // [1, C, T, h, w] for the decode
  bool step_warm = false, decode_warm = false;
};

BenchModel& Current() {
  static BenchModel current;
  return current;
}

// Loads `size` on `device` (reusing the current model when it is that size). Returns an
// error when the model does not fit or cannot be placed.
Status Load(const ReferenceSize& size, c10::Device device) {
  BenchModel& m = Current();
  if (m.model != nullptr && m.size_name == size.name) return Status::Ok();
  m = BenchModel{};
  StatusOr<std::unique_ptr<ReferenceModel>> model =
      ReferenceModel::Create(size, Fp32Policy(), device);
  if (!model.ok()) return model.status();
  const int64_t batch = size.sampler.guidance > 1.0 ? 2 : 1;
  const GenerationInputs in = DrawInputs(size.latent, 0);
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  m.latents = in.noise.to(opts);
  if (batch == 2) {  // as the sampler's GuidedNoise: [uncond; cond]
    m.x = at::cat({m.latents, m.latents}, 0);
    m.cond = at::cat({at::zeros_like(in.cond), in.cond}, 0).to(opts);
  } else {
    m.x = m.latents;
    m.cond = in.cond.to(opts);
  }
  m.t = at::full({batch}, kTimestep, opts);
  m.model = std::move(*model);
  m.size_name = size.name;
  return Status::Ok();
}

void SetPeakRss(benchmark::State& state) {
  state.counters["peak_rss_bytes"] = benchmark::Counter(
      double(PeakRssBytes()), benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}

void SetRate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] =
      benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DenoiserStep(benchmark::State& state, const ReferenceSize& size, c10::Device device) {
  try {
    const Status loaded = Load(size, device);
    if (!loaded.ok()) return state.SkipWithError(loaded.ToString().c_str());
    BenchModel& m = Current();
    m.model->BeginStep(0);
    if (!m.step_warm) {  // first call: allocator and thread pool warm-up, not timed
      m.model->PredictNoise(m.x, m.t, m.cond);
      SynchronizeDevice(device);
      m.step_warm = true;
    }
    ResetPeakRss();
    for (auto _ : state) {
      at::Tensor eps = m.model->PredictNoise(m.x, m.t, m.cond);  // [B, C, T, h, w]
      SynchronizeDevice(device);
      benchmark::DoNotOptimize(eps.data_ptr());
    }
    const int64_t batch = m.x.size(0);
    const double flops = double(DenoiserStepFlops(size, batch));
    SetRate(state, "GFLOP/s", flops * 1e-9);
    state.counters["flops"] = flops;
    state.counters["batch"] = double(batch);
    state.counters["steps"] = double(size.sampler.steps);
    state.counters["frames"] = double(size.latent.frames);
    SetPeakRss(state);
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
  }
}

void BM_Decode(benchmark::State& state, const ReferenceSize& size, c10::Device device) {
  try {
    const Status loaded = Load(size, device);
    if (!loaded.ok()) return state.SkipWithError(loaded.ToString().c_str());
    BenchModel& m = Current();
    m.model->BeginStep(-1);
    if (!m.decode_warm) {
      m.model->Decode(m.latents);
      SynchronizeDevice(device);
      m.decode_warm = true;
    }
    ResetPeakRss();
    for (auto _ : state) {
      at::Tensor rgb = m.model->Decode(m.latents);  // [1, 3, T, H, W]
      SynchronizeDevice(device);
      benchmark::DoNotOptimize(rgb.data_ptr());
    }
    const double flops = double(DecodeFlops(size));
    SetRate(state, "GFLOP/s", flops * 1e-9);
    SetRate(state, "frames/s", double(size.latent.frames));
    state.counters["flops"] = flops;
    state.counters["frames"] = double(size.latent.frames);
    SetPeakRss(state);
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
  }
}

// C = A B, all [n, n] float32: 2 n^3 FLOPs, the rate this machine's BLAS reaches.
void BM_MatmulFp32(benchmark::State& state, c10::Device device) {
  try {
    const int64_t n = state.range(0);
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
    const at::Tensor a = at::randn({n, n}, opts), b = at::randn({n, n}, opts);
    at::Tensor c = at::empty({n, n}, opts);
    at::mm_out(c, a, b);  // warm-up
    SynchronizeDevice(device);
    ResetPeakRss();
    for (auto _ : state) {
      at::mm_out(c, a, b);
      SynchronizeDevice(device);
      benchmark::DoNotOptimize(c.data_ptr());
    }
    SetRate(state, "GFLOP/s", 2.0 * double(n) * double(n) * double(n) * 1e-9);
    state.counters["flops"] = 2.0 * double(n) * double(n) * double(n);
    SetPeakRss(state);
  } catch (const c10::Error& e) {
    state.SkipWithError(e.what_without_backtrace());
  }
}

// Registers the matmul and every size that fits `device`; explains the sizes it skips
// on stderr and in the JSON context ("skipped_sizes").
void RegisterBenchmarks(c10::Device device) {
  benchmark::RegisterBenchmark("BM_MatmulFp32", BM_MatmulFp32, device)
      ->Arg(kMatmulSize)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(kMinSeconds);
  const bool want_large = EnvString("FRAMEGATE_BENCH_LARGE", "0") == "1";
  const int64_t available = AvailableDeviceBytes(device);
  std::string skipped;
  for (const ReferenceSize& size : ReferenceSizes()) {
    const int64_t need = EstimateReferenceBytes(size, Fp32Policy());
    std::string why;
    if (size.name == "large" && !want_large) why = "FRAMEGATE_BENCH_LARGE=1 not set";
    if (why.empty() && !(available > 0 && need < available)) {
      why = "needs about " + FormatBytes(need) + ", " + device.str() + " has " +
            FormatBytes(available) + " available";
    }
    if (!why.empty()) {
      std::cerr << "pipeline_bench: skipping size " << size.name << ": " << why << "\n";
      skipped += (skipped.empty() ? "" : "; ") + size.name + " (" + why + ")";
      continue;
    }
    benchmark::RegisterBenchmark(("BM_DenoiserStep/" + size.name).c_str(), BM_DenoiserStep,
                                 size, device)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(kMinSeconds);
    benchmark::RegisterBenchmark(("BM_Decode/" + size.name).c_str(), BM_Decode, size, device)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(kMinSeconds);
  }
  benchmark::AddCustomContext("skipped_sizes", skipped.empty() ? "none" : skipped);
}

void AddMachineContext(int threads, c10::Device device) {
  const BuildInfo build = CollectBuildInfo();
  const CpuInfo cpu = DetectCpu();
  std::string features;
  for (const std::string& f : cpu.features) features += (features.empty() ? "" : " ") + f;
  benchmark::AddCustomContext("framegate_git_sha", build.git_sha);
  benchmark::AddCustomContext("framegate_threads", std::to_string(threads));
  benchmark::AddCustomContext("device", device.str());
  benchmark::AddCustomContext("cpu_model", cpu.model);
  benchmark::AddCustomContext("cpu_logical_cores", std::to_string(cpu.logical_cores));
  benchmark::AddCustomContext("cpu_features", features);
  benchmark::AddCustomContext("libtorch", build.libtorch_version);
  benchmark::AddCustomContext("blas", build.blas);
  benchmark::AddCustomContext("compiler", build.compiler);
}

}  // namespace
}  // namespace framegate

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  const char* threads_env = std::getenv("FRAMEGATE_THREADS");
  const int threads = framegate::ConfigureThreads(threads_env ? std::atoi(threads_env) : 0);
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(framegate::EnvString("FRAMEGATE_BENCH_DEVICE", "cpu"));
  } catch (const c10::Error& e) {
    std::cerr << "pipeline_bench: bad FRAMEGATE_BENCH_DEVICE: " << e.what_without_backtrace()
              << "\n";
    return 2;
  }
  framegate::AddMachineContext(threads, device);
  framegate::RegisterBenchmarks(device);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
