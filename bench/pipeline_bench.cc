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
// (decode), flops / batch / steps / frames (the size's figures, for the table script),
// peak_rss_bytes (this process's peak resident set during the timed loop: the peak is
// reset before it where Linux allows, else it is the process's peak so far), and
// probe_GFLOP/s, a 2048 matmul timed just before and just after the loop: on a shared
// machine the rate the BLAS reaches changes from minute to minute, so the step/matmul
// ratio is also taken per repetition against this adjacent probe.
// Times are wall-clock (UseRealTime): LibTorch runs on a thread pool, so the main
// thread's CPU time would undercount. Iteration counts are fixed per benchmark.
//
// Sizes: tiny and small when they fit the device's available memory; large only with
// FRAMEGATE_BENCH_LARGE=1 as well (it is meant for GPUs). Environment:
//   FRAMEGATE_THREADS=N        intra-op threads (default: every core this process may use)
//   FRAMEGATE_BENCH_LARGE=1    also register large, if it fits
//   FRAMEGATE_BENCH_DEVICE=D   device to run on (default cpu; others need a build for them)
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <ATen/Functions.h>
#include <c10/util/Exception.h>

#include "harness/build_info.h"
#include "harness/device_sync.h"
#include "harness/error_class.h"
#include "harness/memory_info.h"
#include "pipelines/flop_count.h"
#include "pipelines/reference_model.h"
#include "pipelines/sampler.h"

namespace framegate {
namespace {

// Iterations per repetition: fixed (not MinTime), so that one stall on a shared machine
// cannot set the count of every repetition, and sized by work: about kGflopPerRepetition
// per repetition (tiny step: 10, tiny decode: 19, small step and decode: 1).
constexpr double kGflopPerRepetition = 30.0;
constexpr int64_t kMatmulIterations = 5;
constexpr int64_t kMatmulSize = 2048;
constexpr double kTimestep = 500.0;

// The batch of one sampler step: 2 under classifier-free guidance (sampler.h).
int64_t StepBatch(const ReferenceSize& size) { return size.sampler.guidance > 1.0 ? 2 : 1; }

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
  malloc_trim(0);  // the previous size's heap back to the system before this size's peak
  StatusOr<std::unique_ptr<ReferenceModel>> model = ReferenceModel::Create(size, Fp32Policy(), device);
  if (!model.ok()) return model.status();
  const int64_t batch = StepBatch(size);
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
  state.counters["peak_rss_bytes"] =
      benchmark::Counter(double(PeakRssBytes()), benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}

void SetRate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

// A [n, n] x [n, n] float32 matmul, allocated once for the whole run (its 48 MiB are in
// the baseline RSS, and probing allocates nothing), timed on demand.
struct MatmulProbe {
  explicit MatmulProbe(c10::Device device)
      : device(device),
        a(at::randn({kMatmulSize, kMatmulSize}, at::TensorOptions().device(device))),
        b(at::randn({kMatmulSize, kMatmulSize}, at::TensorOptions().device(device))),
        c(at::empty({kMatmulSize, kMatmulSize}, at::TensorOptions().device(device))) {}

  // GFLOP/s of one matmul run now, after one untimed warm-up.
  double Gflops() {
    at::mm_out(c, a, b);
    SynchronizeDevice(device);
    const auto start = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    SynchronizeDevice(device);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return 2.0 * std::pow(double(kMatmulSize), 3) * 1e-9 / seconds;
  }

  c10::Device device;
  at::Tensor a, b, c;  // float32 [n, n]
};

// The run's probe; the first call (from main, before any benchmark) fixes the device.
MatmulProbe& Probe(c10::Device device) {
  static MatmulProbe probe(device);
  return probe;
}

// Runs a benchmark's body; an exception from LibTorch skips the benchmark with the
// failure class harness/error_class.h gives it ("out_of_memory: ...").
template <class Body>
void Guarded(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(ClassifyError(e.what()).Reason().c_str());
  }
}

// Times `run` (one iteration) in the benchmark loop. Around the loop: a matmul probe
// before and after (counter "probe_GFLOP/s", their mean, so that the step/matmul ratio
// can be taken from rates measured seconds apart on a shared machine), and the peak RSS
// of the loop: the resident set at its start (weights, the heap the untimed warm-up left,
// as in a real generation, where steps run back to back) plus what the loop adds.
template <class Run>
void TimedLoop(benchmark::State& state, c10::Device device, Run&& run) {
  const double before = Probe(device).Gflops();
  ResetPeakRss();
  for (auto _ : state) {
    run();
    SynchronizeDevice(device);
  }
  SetPeakRss(state);
  const double after = Probe(device).Gflops();
  state.counters["probe_GFLOP/s"] = (before + after) / 2.0;
}

void BM_DenoiserStep(benchmark::State& state, const ReferenceSize& size, c10::Device device) {
  Guarded(state, [&] {
    const Status loaded = Load(size, device);
    if (!loaded.ok()) return state.SkipWithError(loaded.ToString().c_str());
    BenchModel& m = Current();
    m.model->BeginStep(0);
    if (!m.step_warm) {  // first call: allocator and thread pool warm-up, not timed
      m.model->PredictNoise(m.x, m.t, m.cond);
      SynchronizeDevice(device);
      m.step_warm = true;
    }
    TimedLoop(state, device, [&m] {
      at::Tensor eps = m.model->PredictNoise(m.x, m.t, m.cond);  // [B, C, T, h, w]
      benchmark::DoNotOptimize(eps.data_ptr());
    });
    const int64_t batch = m.x.size(0);
    const double flops = double(DenoiserStepFlops(size, batch));
    SetRate(state, "GFLOP/s", flops * 1e-9);
    state.counters["flops"] = flops;
    state.counters["batch"] = double(batch);
    state.counters["steps"] = double(size.sampler.steps);
    state.counters["frames"] = double(size.latent.frames);
  });
}

void BM_Decode(benchmark::State& state, const ReferenceSize& size, c10::Device device) {
  Guarded(state, [&] {
    const Status loaded = Load(size, device);
    if (!loaded.ok()) return state.SkipWithError(loaded.ToString().c_str());
    BenchModel& m = Current();
    m.model->BeginStep(-1);
    if (!m.decode_warm) {
      m.model->Decode(m.latents);
      SynchronizeDevice(device);
      m.decode_warm = true;
    }
    TimedLoop(state, device, [&m] {
      at::Tensor rgb = m.model->Decode(m.latents);  // [1, 3, T, H, W]
      benchmark::DoNotOptimize(rgb.data_ptr());
    });
    const double flops = double(DecodeFlops(size));
    SetRate(state, "GFLOP/s", flops * 1e-9);
    SetRate(state, "frames/s", double(size.latent.frames));
    state.counters["flops"] = flops;
    state.counters["frames"] = double(size.latent.frames);
  });
}

// C = A B, all [n, n] float32: 2 n^3 FLOPs, the rate this machine's BLAS reaches.
void BM_MatmulFp32(benchmark::State& state, c10::Device device) {
  Guarded(state, [&] {
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
    SetPeakRss(state);
    const double flops = 2.0 * double(n) * double(n) * double(n);
    SetRate(state, "GFLOP/s", flops * 1e-9);
    state.counters["flops"] = flops;
  });
}

benchmark::IterationCount IterationsFor(int64_t flops) {
  return std::max<benchmark::IterationCount>(1, std::llround(kGflopPerRepetition / (double(flops) * 1e-9)));
}

// Registers the matmul and every size that fits `device`; explains the sizes it skips
// on stderr and in the JSON context ("skipped_sizes").
void RegisterBenchmarks(c10::Device device) {
  benchmark::RegisterBenchmark("BM_MatmulFp32", BM_MatmulFp32, device)
      ->Arg(kMatmulSize)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(kMatmulIterations);
  const bool want_large = EnvString("FRAMEGATE_BENCH_LARGE", "0") == "1";
  const int64_t available = AvailableDeviceBytes(device);
  std::string skipped;
  for (const ReferenceSize& size : ReferenceSizes()) {
    const int64_t need = EstimateReferenceBytes(size, Fp32Policy());
    std::string why;
    if (size.name == "large" && !want_large) why = "FRAMEGATE_BENCH_LARGE=1 not set";
    if (why.empty() && available > 0 && need >= available) {  // 0: unknown, try it
      why = "needs about " + FormatBytes(need) + ", " + device.str() + " has " + FormatBytes(available) +
            " available";
    }
    if (!why.empty()) {
      std::cerr << "pipeline_bench: skipping size " << size.name << ": " << why << "\n";
      skipped += (skipped.empty() ? "" : "; ") + size.name + " (" + why + ")";
      continue;
    }
    benchmark::RegisterBenchmark(("BM_DenoiserStep/" + size.name).c_str(), BM_DenoiserStep, size, device)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(IterationsFor(DenoiserStepFlops(size, StepBatch(size))));
    benchmark::RegisterBenchmark(("BM_Decode/" + size.name).c_str(), BM_Decode, size, device)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(IterationsFor(DecodeFlops(size)));
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
  // The process's resident set before any benchmark (LibTorch and BLAS loaded, the
  // matmul probe allocated): every peak_rss_bytes includes it.
  ResetPeakRss();
  benchmark::AddCustomContext("baseline_rss_bytes", std::to_string(PeakRssBytes()));
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
    std::cerr << "pipeline_bench: bad FRAMEGATE_BENCH_DEVICE: " << e.what_without_backtrace() << "\n";
    return 2;
  }
  framegate::Probe(device);  // allocated before the baseline RSS is taken
  framegate::AddMachineContext(threads, device);
  framegate::RegisterBenchmarks(device);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
