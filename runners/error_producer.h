// Naming the place of a finite failure (FAIL, BROKEN_FRAMES): the op whose isolated
// error most exceeds what its compute dtype predicts (pipelines/module_shadow.h).
// Two more runs of the cell's pipeline: FP32, recording every op's inputs and outputs at
// the probed steps, then the policy, each op fed the recorded FP32 inputs.
#pragma once

#include <set>
#include <vector>

#include "harness/cell_result.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

struct IsolatedError;  // pipelines/module_shadow.h

// An op makes a failure's error when its isolated error is at least this many times what
// its precision predicts; below, it makes what any op of that precision makes. Measured:
// every planted defect of the probe rounds (60 finite FAIL cells) made 3.5x or more (or
// an offset a norm cancels), healthy models that failed a profile 0.95-1.9x.
constexpr double kCauseExcess = 2;

// An elementwise sum (aten::add, aten::sub, aten::rsub) fed inputs in its precision makes
// about that precision's rounding at most (healthy ones 0.3-1x), unless it cancels them:
// then its input's rounding comes back relative to a smaller output. From this many times
// what its precision predicts (two bits lost), such a sum may make a cell's error below
// kCauseExcess: an adversarial `(z + 64) - 64` before a steep decoder made 1.77-1.90x and
// most of its cell's error. Written in place (`z += 64; z -= 64`), the sum shows only in
// the inputs it hands on: one at this many times its precision is the search's note.
constexpr double kCancellingSumExcess = 1.5;

// Whether `op` is an elementwise sum: aten::add, aten::sub, aten::rsub, aten::diff (the
// difference of neighbours along a dimension, a frame difference).
bool IsElementwiseSum(const std::string& op);
// An elementwise sum or a reduction that sums (aten::mean, aten::sum): the makers of a
// cancelling sum's inputs kept in FP32 with it (`g - g.mean(2)`).
bool IsSumOrMean(const std::string& op);

// Whether `error` is an elementwise sum at kCancellingSumExcess or more.
bool IsCancellingSum(const IsolatedError& error);

// For a cause fed other indices than the FP32 run's that a float was rounded into
// (IsolatedError::index_maker): "its indices are not the FP32 run's: denoiser.t_embed
// (aten::to) rounded a float into them"; "" for any other.
std::string IndexMakerNote(const IsolatedError& error);

// The producer's isolated error over what its precision predicts; 0 when nothing is predicted.
double ExcessOf(const ErrorProducer& producer);

// Whether `producer` names where an error is made: an op at kCauseExcess or more, or the
// maker of an offset a norm cancels.
bool NamesACause(const ErrorProducer& producer);

// Whether the search measured every probed op of both runs, on the same path, and none
// makes kCauseExcess times what its precision predicts, nor saturates FP8 weights, nor
// makes an offset a norm cancels: the error is what the policy's rounding makes.
bool RoundingAloneMadeTheError(const ErrorProducer& producer);

// The steps probed for a sampler of `steps` steps: the first, the middle, the last and
// the decode (-1).
std::set<int> ProducerProbeSteps(int steps);

// How much a producer search looks at:
//   kProbedSteps  the steps of ProducerProbeSteps: enough to name where an error is made;
//   kEveryStep    every step and the decode (ProducerProbeSteps first, then the others in
//                 groups that fit the shadow's memory cap, while each finds rounding alone),
//                 and each op's inputs made in the same forward: enough to rest a verdict on
//                 (RoundingAloneMadeTheError). An input whose
//                 error is kCauseExcess times what its maker's precision predicts was made
//                 where no op's isolated error shows it (an op in place, a slice of a much
//                 larger value): the note says where it was taken.
enum class ProducerSearch { kProbedSteps, kEveryStep };

// The producer for `spec`'s pipeline under its policy. A reference model (no per-op
// hooks) gets found = false and a note saying the producer is not localised; so does a
// run that ends before the probed steps (the note says why). A Status only for bad input
// (a broken package). With `models`, models are taken from and given back to that cache.
// With `causes`: every site of the search that decided at kCauseExcess or more, largest
// excess first (the producer is the first, or the op a norm's offset names), the op that
// made an input kCauseExcess times its precision (unless in place: the input may be one
// call's spike of an op whose isolated error, over the calls, is less), and, where the
// search found rounding alone, its cancelling sums (IsCancellingSum) at every step.
// With `reference`, the recorded run is under that policy instead of FP32: a compute
// part's (runners/cell_bound.h: the same FP8 weights computed in FP32), so that each op is
// predicted what its compute dtype alone makes, not its FP8 storage's 2^-3 or 2^-2.
StatusOr<ErrorProducer> LocateErrorProducer(const PipelineSpec& spec, int steps, ModelCache* models = nullptr,
                                            ProducerSearch search = ProducerSearch::kProbedSteps,
                                            std::vector<IsolatedError>* causes = nullptr,
                                            const DtypePolicy* reference = nullptr);

// The FP32 island that keeps op `op` at `module` in FP32 with what it computes from: its
// module when the op uses the module's own weights (or no op is known), whose weights then
// stay FP32 too (not rounded to FP8 or FP16); else the op alone at its module's level.
std::string IslandKeepingInFp32(const std::string& module, const std::string& op,
                                const std::vector<WeightSize>& weights);

}  // namespace framegate
