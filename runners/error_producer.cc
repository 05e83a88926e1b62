#include "runners/error_producer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "pipelines/module_shadow.h"
#include "pipelines/op_islands.h"
#include "pipelines/weight_store.h"
#include "pipelines/weighted_ops.h"

namespace framegate {

std::set<int> ProducerProbeSteps(int steps) {
  std::set<int> probed = {-1};
  if (steps > 0) probed.insert({0, steps / 2, steps - 1});
  return probed;
}

bool NamesACause(const ErrorProducer& producer) {
  if (!producer.found) return false;
  // Saturated weights are a cause whatever the op's error (IsolatedError::Excess).
  return !producer.norm_module.empty() || !(producer.predicted_error > 0) ||
         !(producer.isolated_error < kCauseExcess * producer.predicted_error) ||
         producer.saturated_weight > 0;
}

bool RoundingAloneMadeTheError(const ErrorProducer& producer) {
  // Every caveat (saturated weights, a cancelling norm, a memory cap, another path) is
  // in the note of a found producer.
  return producer.found && producer.note.empty() && !NamesACause(producer);
}

namespace {

// What the shadow may keep of one FP32 run's tensors.
constexpr int64_t kShadowBytes = int64_t{1} << 30;
const char kNoExcessNote[] = "no op makes an error beyond its precision's: the producer is not localised";

// One search over the steps `probed`: a run under `reference` (FP32, or a compute part's
// reference) recording them, a run under the policy fed them. `inputs`: also the errors of
// inputs made in the same forward (kEveryStep). `recorded_bytes`: what the recorded run's
// tensors took.
StatusOr<ErrorProducer> SearchSteps(const PipelineSpec& spec, const DtypePolicy& reference,
                                    const std::set<int>& probed, ModelCache* models, bool inputs,
                                    int64_t* recorded_bytes, std::vector<IsolatedError>* causes) {
  causes->clear();
  ErrorProducer producer;
  PipelineSpec recorded_spec = spec;
  recorded_spec.policy = reference;
  ModuleShadow recorded(ModuleShadow::Mode::kRecord, probed, reference, nullptr, kShadowBytes);
  {
    const ModuleShadow::ActiveScope scope(recorded);
    StatusOr<PipelineOutcome> run = RunPipeline(recorded_spec, nullptr, nullptr, models);
    if (!run.ok()) return run.status();
    if (run->kind != RunEnd::kFinished) {
      const std::string name = reference.name == Fp32Policy().name ? "FP32" : reference.name;
      producer.note = "the " + name + " run did not finish: the producer is not localised";
      return producer;
    }
  }
  // Weights stored alike in both runs round alike: only the compute dtype is predicted.
  DtypePolicy predicted = spec.policy;
  if (reference.storage == spec.policy.storage) predicted.storage = WeightStorage::kFloat32;
  ModuleShadow compared(ModuleShadow::Mode::kCompare, probed, predicted, &recorded);
  if (inputs) compared.MeasureMadeInputs();
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
    producer.note = kNoExcessNote;
    if (!diverged.empty()) producer.note += "; " + diverged;
    return producer;
  }
  for (const IsolatedError& e : errors) {
    if (e.Excess() >= kCauseExcess || IsCancellingSum(e)) causes->push_back(e);
  }
  const IsolatedError& top = errors.front();
  producer.found = true;
  producer.module = top.module;
  producer.op = top.op;
  producer.isolated_error = top.error;
  producer.predicted_error = top.predicted;
  producer.saturated_weight = top.saturated_weight;
  if (top.saturated_weight > 0) {  // only FP8 storage saturates
    char text[160];
    std::snprintf(text, sizeof text, "its weights reach %.3g, beyond %s's largest (%g): they saturate",
                  top.saturated_weight, WeightStorageName(spec.policy.storage),
                  Fp8MaxFinite(*Fp8FormatOf(spec.policy.storage)));
    producer.note = text;
  }
  if (top.carried_error > 0 && std::isfinite(top.Excess()) && top.Excess() >= kCauseExcess) {
    char text[240];
    std::snprintf(text, sizeof text,
                  "it computes in FP32 on an input made from a value rounded before it (error %.3g): "
                  "it amplifies that rounding %.0fx",
                  top.carried_error, top.error / top.carried_error);
    producer.note = text;
  }
  if (const std::string index = IndexMakerNote(top); !index.empty() && top.Excess() >= kCauseExcess)
    producer.note += std::string(producer.note.empty() ? "" : "; ") + index;
  if (top.input_offset >= kCancellingOffset && !top.input_maker.empty()) {
    // The norm returns the rounding of its input's offset: the maker of the offset made it
    // (up the sums that carried it there: IsolatedError::offset_origin).
    const bool carried = !top.offset_origin.empty() && !(top.offset_origin == top.input_maker);
    const OpSite& made = carried ? top.offset_origin : top.input_maker;
    std::string from = "this op";
    if (carried)
      from = top.input_maker.module + " (" + top.input_maker.op + "), carried by sums from this op,";
    char text[640];
    std::snprintf(text, sizeof text,
                  "that error is %s's (%s), whose input from %s has a mean %.0fx its spread: "
                  "the norm cancels that offset and returns its rounding at full scale",
                  top.module.c_str(), top.op.c_str(), from.c_str(), top.input_offset);
    producer.norm_module = top.module;
    producer.norm_op = top.op;
    producer.module = made.module;
    producer.op = made.op;
    producer.note = text;
    for (const std::vector<OpSite>* sites : {&top.offset_carriers, &top.offset_readers}) {
      for (const OpSite& site : *sites) producer.offset_stream.emplace_back(site.module, site.op);
    }
  }
  if (producer.norm_module.empty()) {
    // The norm's own error was measured on its exact input (an FP32 island): not the top.
    // The ops that rounded the offset it cancels are causes, each as the maker of that
    // offset (kept with the norm, an op at a root as an op island).
    const ModuleShadow::RoundedNorm norm = compared.RoundedCancellingNorm();
    if (!norm.note.empty()) producer.note += std::string(producer.note.empty() ? "" : "; ") + norm.note;
    for (const IsolatedError& rounder : norm.rounded_by) {
      producer.offset_rounded_by.emplace_back(rounder.module, rounder.op);
      const auto same = [&](const IsolatedError& e) {
        return e.module == rounder.module && e.op == rounder.op;
      };
      if (std::none_of(causes->begin(), causes->end(), same)) causes->push_back(rounder);
    }
  }
  const ModuleShadow::MadeInput& input = compared.worst_made_input();
  // Its maker is a cause whose isolated error shows it (an op fed a rounding made before
  // it, whose output the next op takes as made): nothing more to say.
  const auto shows = [&](const IsolatedError& e) {
    return e.module == input.maker.module && e.op == input.maker.op && e.error >= 0.5 * input.error;
  };
  if (input.excess >= kCauseExcess && std::none_of(causes->begin(), causes->end(), shows)) {
    char text[400];
    std::snprintf(text, sizeof text,
                  "%s (%s) takes an input with an error of %.3g, %.0fx what the precision of the op "
                  "that made it predicts: it was made where no op's isolated error shows it (an op in "
                  "place, or a slice of a much larger value)",
                  input.site.module.c_str(), input.site.op.c_str(), input.error, input.excess);
    producer.note += std::string(producer.note.empty() ? "" : "; ") + text;
    // Its maker, unless in place, can be kept in FP32: a cause at that input's excess (its
    // isolated error spreads over the probed calls; the input is one call's).
    const OpSite& maker = input.maker;
    const auto same = [&](const IsolatedError& e) { return e.module == maker.module && e.op == maker.op; };
    if (!maker.empty() && maker.op.back() != '_' && std::none_of(causes->begin(), causes->end(), same)) {
      const auto site = std::find_if(errors.begin(), errors.end(), same);
      IsolatedError made = site != errors.end() ? *site : IsolatedError{};
      made.module = maker.module;
      made.op = maker.op;
      made.error = input.error;
      made.predicted = input.error / input.excess;
      causes->push_back(made);
      SortByExcess(*causes);
    }
  } else if (const ModuleShadow::MadeInput& sum = compared.worst_input_of_a_sum_in_place();
             sum.excess >= kCancellingSumExcess) {
    // A sum in place has no isolated error of its own; kept in FP32 it cannot be.
    char text[480];
    std::snprintf(text, sizeof text,
                  "%s (%s) takes an input with an error of %.3g, %.2fx what the precision of %s (%s) "
                  "predicts, a sum written in place: it cancels its rounded input",
                  sum.site.module.c_str(), sum.site.op.c_str(), sum.error, sum.excess,
                  sum.maker.module.c_str(), sum.maker.op.c_str());
    producer.note += std::string(producer.note.empty() ? "" : "; ") + text;
    if (!NamesACause(producer)) {  // the sum made the error, not the top op
      producer.module = sum.maker.module;
      producer.op = sum.maker.op;
      producer.isolated_error = sum.error;
      producer.predicted_error = sum.error / sum.excess;
    }
  }
  if (recorded.truncated()) {
    producer.note += std::string(producer.note.empty() ? "" : "; ") +
                     "only part of the probed steps was recorded (memory cap)";
  }
  if (!diverged.empty()) producer.note += std::string(producer.note.empty() ? "" : "; ") + diverged;
  *recorded_bytes = recorded.recorded_bytes();
  return producer;
}

}  // namespace

std::string IslandKeepingInFp32(const std::string& module, const std::string& op,
                                const std::vector<WeightSize>& weights) {
  const auto own = [&](const WeightSize& w) { return ModuleOfWeight(w.name) == module; };
  if (op.empty() || (FindWeightedOp(op) != nullptr && std::any_of(weights.begin(), weights.end(), own)))
    return module;
  return OpIslandEntry(module, op);
}

std::string IndexMakerNote(const IsolatedError& error) {
  if (error.index_maker.empty()) return "";
  return "its indices are not the FP32 run's: " + error.index_maker.module + " (" + error.index_maker.op +
         ") rounded a float into them";
}

bool IsElementwiseSum(const std::string& op) {
  return op == "aten::add" || op == "aten::sub" || op == "aten::rsub" || op == "aten::diff";
}

bool IsSumOrMean(const std::string& op) {
  return IsElementwiseSum(op) || op == "aten::mean" || op == "aten::sum";
}

bool IsCancellingSum(const IsolatedError& error) {
  return IsElementwiseSum(error.op) && error.Excess() >= kCancellingSumExcess;
}

double ExcessOf(const ErrorProducer& p) {
  return p.predicted_error > 0 ? p.isolated_error / p.predicted_error : 0;
}

StatusOr<ErrorProducer> LocateErrorProducer(const PipelineSpec& spec, int steps, ModelCache* models,
                                            ProducerSearch search, std::vector<IsolatedError>* causes,
                                            const DtypePolicy* reference) {
  const DtypePolicy recorded_under = reference != nullptr ? *reference : Fp32Policy();
  std::vector<IsolatedError> unused;
  if (causes == nullptr) causes = &unused;
  causes->clear();
  if (spec.model_dir.empty()) {
    ErrorProducer producer;
    producer.note = "the reference model has no per-op hooks: the producer is not localised";
    return producer;
  }
  const std::set<int> first = ProducerProbeSteps(steps);
  const bool every_step = search == ProducerSearch::kEveryStep;
  int64_t bytes = 0;
  StatusOr<ErrorProducer> producer =
      SearchSteps(spec, recorded_under, first, models, every_step, &bytes, causes);
  if (!producer.ok() || !every_step || !RoundingAloneMadeTheError(*producer)) return producer;
  // The other steps, as many at a time as the first steps' size says fit the memory cap.
  std::vector<int> rest;
  for (int step = 0; step < steps; ++step) {
    if (first.count(step) == 0) rest.push_back(step);
  }
  const int64_t per_step = std::max<int64_t>(1, bytes / static_cast<int64_t>(first.size()));
  const size_t group = static_cast<size_t>(std::max<int64_t>(1, kShadowBytes * 3 / 4 / per_step));
  for (size_t i = 0; i < rest.size(); i += group) {
    const std::set<int> probed(rest.begin() + i, rest.begin() + std::min(rest.size(), i + group));
    std::vector<IsolatedError> more_causes;
    StatusOr<ErrorProducer> more =
        SearchSteps(spec, recorded_under, probed, models, true, &bytes, &more_causes);
    if (!more.ok()) return more.status();
    if (!more->found && more->note == kNoExcessNote) continue;  // nothing rounded at these steps
    if (!RoundingAloneMadeTheError(*more)) {                    // a cause or a caveat decides
      *causes = std::move(more_causes);
      return more;
    }
    for (IsolatedError& sum : more_causes) {  // rounding alone: cancelling sums only
      const auto same = [&](const IsolatedError& c) { return c.module == sum.module && c.op == sum.op; };
      if (std::none_of(causes->begin(), causes->end(), same)) causes->push_back(std::move(sum));
    }
    if (ExcessOf(*more) > ExcessOf(*producer)) producer = std::move(more);
  }
  SortByExcess(*causes);
  return producer;
}

}  // namespace framegate
