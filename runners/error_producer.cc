#include "runners/error_producer.h"

#include <cmath>
#include <cstdio>

#include "pipelines/module_shadow.h"
#include "pipelines/weight_store.h"

namespace framegate {

std::set<int> ProducerProbeSteps(int steps) {
  std::set<int> probed = {-1};
  if (steps > 0) probed.insert({0, steps / 2, steps - 1});
  return probed;
}

bool NamesACause(const ErrorProducer& producer) {
  if (!producer.found) return false;
  return !producer.norm_module.empty() || !(producer.predicted_error > 0) ||
         !(producer.isolated_error < kCauseExcess * producer.predicted_error);
}

bool RoundingAloneMadeTheError(const ErrorProducer& producer) {
  // Every caveat (saturated weights, a cancelling norm, a memory cap, another path) is
  // in the note of a found producer.
  return producer.found && producer.note.empty() && !NamesACause(producer);
}

StatusOr<ErrorProducer> LocateErrorProducer(const PipelineSpec& spec, int steps, ModelCache* models) {
  ErrorProducer producer;
  if (spec.model_dir.empty()) {
    producer.note = "the reference model has no per-op hooks: the producer is not localised";
    return producer;
  }
  const std::set<int> probed = ProducerProbeSteps(steps);
  PipelineSpec fp32 = spec;
  fp32.policy = Fp32Policy();
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, probed, fp32.policy);
  {
    const ModuleShadow::ActiveScope scope(recorded);
    StatusOr<PipelineOutcome> run = RunPipeline(fp32, nullptr, nullptr, models);
    if (!run.ok()) return run.status();
    if (run->kind != RunEnd::kFinished) {
      producer.note = "the FP32 run did not finish: the producer is not localised";
      return producer;
    }
  }
  ModuleShadow compared(ModuleShadow::Mode::kCompare, probed, spec.policy, &recorded);
  {
    const ModuleShadow::ActiveScope scope(compared);
    StatusOr<PipelineOutcome> run = RunPipeline(spec, nullptr, nullptr, models);
    if (!run.ok()) return run.status();
    if (run->kind != RunEnd::kFinished) {  // its sites stop where it did: no ranking
      producer.note = "the run fed FP32 inputs did not finish (" + run->error.Reason() +
                      "): the producer is not localised";
      return producer;
    }
  }
  // Appended to whatever the producer says: past it, sites pair calls of different paths.
  const std::string diverged =
      compared.diverged_at().empty()
          ? ""
          : "the run took a path the FP32 run did not, first " + compared.diverged_at() +
                " (a branch on a value or a dtype): errors after it compare different computations";
  const std::vector<IsolatedError> errors = compared.Errors();
  if (errors.empty() || errors.front().Excess() <= 0) {
    producer.note = "no op makes an error beyond its precision's: the producer is not localised";
    if (!diverged.empty()) producer.note += "; " + diverged;
    return producer;
  }
  const IsolatedError& top = errors.front();
  producer.found = true;
  producer.module = top.module;
  producer.op = top.op;
  producer.isolated_error = top.error;
  producer.predicted_error = top.predicted;
  if (top.saturated_weight > 0) {  // only FP8 storage saturates
    char text[160];
    std::snprintf(text, sizeof text, "its weights reach %.3g, beyond %s's largest (%g): they saturate",
                  top.saturated_weight, WeightStorageName(spec.policy.storage),
                  Fp8MaxFinite(*Fp8FormatOf(spec.policy.storage)));
    producer.note = text;
  }
  if (top.input_offset >= kCancellingOffset && !top.input_maker_module.empty()) {
    // The norm returns the rounding of its input's offset: the maker of the offset made it.
    char text[320];
    std::snprintf(text, sizeof text,
                  "that error is %s's (%s), whose input from this op has a mean %.0fx its spread: "
                  "the norm cancels that offset and returns its rounding at full scale",
                  top.module.c_str(), top.op.c_str(), top.input_offset);
    producer.norm_module = top.module;
    producer.norm_op = top.op;
    producer.module = top.input_maker_module;
    producer.op = top.input_maker_op;
    producer.note = text;
  }
  if (producer.norm_module.empty()) {
    // The norm's own error was measured on its exact input (an FP32 island): not the top.
    const std::string norm = compared.RoundedCancellingNorm();
    if (!norm.empty()) producer.note += std::string(producer.note.empty() ? "" : "; ") + norm;
  }
  if (recorded.truncated()) {
    producer.note += std::string(producer.note.empty() ? "" : "; ") +
                     "only part of the probed steps was recorded (memory cap)";
  }
  if (!diverged.empty()) producer.note += std::string(producer.note.empty() ? "" : "; ") + diverged;
  return producer;
}

}  // namespace framegate
