// The dtype audit (field reports F1 and F4): before running, every weight whose stored
// dtype is not what the policy asks for; after one traced denoiser step, every module
// (in a model package: every op with a weight, by module path) whose input dtype differs
// from its weight's. The traced step runs on this device's kernels, but the finding does
// not depend on them: a mismatch is recorded before the op runs, so a device whose
// autocast would hide it (CUDA) still gets it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/error_class.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

struct WeightDtypeFinding {
  std::string name;      // "time_embed.0.weight"
  std::string expected;  // "bf16"
  std::string actual;    // "fp32"
};

struct DtypeAudit {
  std::vector<WeightDtypeFinding> weights;    // before running
  std::vector<DtypeMismatch> inputs;          // during the traced step and decode
  std::optional<ClassifiedError> step_error;  // the traced step or decode raised (the first)
  bool traced = false;   // one denoiser step and one decode ran, every input dtype watched
  std::string observed;  // packages: what the instrumentation saw (ObservedSummary)
  bool Clean() const { return weights.empty() && inputs.empty() && !step_error; }
};

// The dtype a weight of module `module` should have under `policy` ("fp32", "bf16",
// "uint8" for FP8 codes; the compute dtype for a weight FP8 storage does not hold, under
// fp8_weights = "linear-conv" any but a Linear's or a Conv's weight).
c10::ScalarType ExpectedStoredDtype(const DtypePolicy& policy, ModuleKind kind, const std::string& module,
                                    bool linear_or_conv_weight);

// Audits the reference pipeline or a model package (spec.model_dir): bad input is a Status.
StatusOr<DtypeAudit> AuditDtypes(const PipelineSpec& spec);

}  // namespace framegate
