#include "runners/step_replay.h"

#include <cmath>
#include <limits>
#include <string>

#include <ATen/ATen.h>

#include "harness/sha256.h"

namespace framegate {
namespace {

// The bytes of `t` (float32 on the CPU) appended to `out`.
void AppendBytes(const at::Tensor& t, std::string& out) {
  const at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
  out.append(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<size_t>(c.numel()) * 4);
}

// What a pass's observer records: each module output's norm, per step, in call order.
struct NormRecorder {
  std::vector<std::vector<double>> norms;  // [step]
  std::vector<std::string> modules;        // step 0's call order
  void Observe(const ModuleOutput& out) {
    if (!out.value.defined() || !out.value.is_floating_point() || out.step < 0) return;
    const size_t step = static_cast<size_t>(out.step);
    if (norms.size() <= step) norms.resize(step + 1);
    norms[step].push_back(out.value.to(at::kFloat).norm().item<double>());
    if (step == 0) modules.push_back(out.op[0] ? out.module + ":" + out.op : out.module);
  }
};

StepReplay Summarise(const GenerationResult& r, const Golden& golden, NormRecorder recorder) {
  StepReplay pass;
  std::string bytes;
  const int64_t steps = r.trajectory.size(0) - 1;
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor out = r.trajectory[i + 1];
    pass.step_rel_l2.push_back(RelativeL2(out, golden.trajectory[i + 1]));
    if (pass.first_nonfinite_step == -2 && !at::isfinite(out).all().item<bool>())
      pass.first_nonfinite_step = static_cast<int>(i);
    AppendBytes(out, bytes);
  }
  if (pass.first_nonfinite_step == -2 && !at::isfinite(r.decoded).all().item<bool>())
    pass.first_nonfinite_step = -1;
  pass.decode_rel_l2 = RelativeL2(r.frames, golden.frames);
  AppendBytes(r.frames, bytes);
  pass.digest = Sha256Hex(bytes);
  pass.module_norms = std::move(recorder.norms);
  pass.modules = std::move(recorder.modules);
  pass.seconds = r.decode_seconds;
  for (double s : r.step_seconds) pass.seconds += s;
  return pass;
}

uint64_t Mix(uint64_t a, uint64_t b) { return (a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2))); }

}  // namespace

double RelativeL2(const at::Tensor& a, const at::Tensor& b) {
  const double diff = (a.to(at::kDouble) - b.to(at::kDouble)).norm().item<double>();
  const double ref = b.to(at::kDouble).norm().item<double>();
  if (!std::isfinite(diff)) return std::numeric_limits<double>::infinity();
  if (ref == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
  return diff / ref;
}

StatusOr<ReplayPasses> RunReplayPasses(const PipelineSpec& spec, const Golden& golden, int passes,
                                       const SdcSpec* inject, uint64_t seed, ModelCache* models,
                                       const PassJudge& judge) {
  PipelineSpec replay = spec;
  replay.replay_trajectory = golden.trajectory;
  ReplayPasses out;
  std::optional<SdcInjector> injector;
  int64_t outputs = 0;
  if (inject != nullptr) {
    injector.emplace(*inject);
    injector->BeginPass();
    StatusOr<PipelineOutcome> counted = RunPipeline(
        replay, [&](const ModuleOutput& o) { injector->Observe(o); }, nullptr, models);
    if (!counted.ok()) return counted.status();
    outputs = injector->outputs_seen();
  }
  for (int i = 0; i < passes; ++i) {
    NormRecorder recorder;
    if (injector) {
      injector->Arm(outputs, inject->persistent ? seed : Mix(seed, static_cast<uint64_t>(i) + 1));
      injector->BeginPass();
    }
    const ModuleObserver observe = [&](const ModuleOutput& o) {
      if (injector) injector->Observe(o);
      recorder.Observe(o);
    };
    StatusOr<PipelineOutcome> outcome = RunPipeline(replay, observe, nullptr, models);
    if (!outcome.ok()) return outcome.status();
    if (i == 0) out.first = *outcome;
    if (outcome->kind != RunEnd::kFinished) break;
    out.passes.push_back(Summarise(outcome->result, golden, std::move(recorder)));
    if (judge) judge(outcome->result, out.passes.back());
  }
  if (injector) out.injected = injector->flips();
  return out;
}

}  // namespace framegate
