// Step replay passes of one cell (`check --replay N`, `framegate qualify`): each pass runs
// every sampler step from the golden's latents before it and records how far each step's
// output is from the golden's latents after it, the module output norms that name where a
// pass deviates, and a digest that says whether two passes are bitwise equal.
#pragma once

#include <functional>
#include <vector>

#include "golden/golden_file.h"
#include "harness/cell_result.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"
#include "pipelines/sdc_injection.h"

namespace framegate {

struct ReplayPasses {
  std::vector<StepReplay> passes;
  PipelineOutcome first;          // the first pass's outcome (judged like a free run)
  std::vector<SdcFlip> injected;  // the flips made, with an injection
};

// Runs `passes` replays of `spec` from `golden.trajectory` (which must be defined). With
// `inject`, a first uninjected pass counts the op outputs and each pass then flips
// inject->rate of them: the same ones in every pass (persistent, seeded by `seed`) or
// other ones (transient). A pass that does not finish ends the passes (`first` says why
// when it is the first). Bad input only (a device this build lacks) is a Status.
// `judge` fills what the caller judges of each finished pass (its decode's verdict).
using PassJudge = std::function<void(const GenerationResult& result, StepReplay& pass)>;
StatusOr<ReplayPasses> RunReplayPasses(const PipelineSpec& spec, const Golden& golden, int passes,
                                       const SdcSpec* inject, uint64_t seed, ModelCache* models,
                                       const PassJudge& judge = nullptr);

// Relative L2 of `a` against `b`: ||a - b|| / ||b|| (0 when both are 0; +inf when
// only b is 0 or a is not finite).
double RelativeL2(const at::Tensor& a, const at::Tensor& b);

}  // namespace framegate
