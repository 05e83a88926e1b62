// The dtype audit (field reports F1 and F4): before running, every weight whose stored
// dtype is not what the policy asks for; after one traced denoiser step, every module
// whose input dtype differs from its weight's.
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
  std::vector<WeightDtypeFinding> weights;  // before running
  std::vector<DtypeMismatch> inputs;        // during one traced step
  std::optional<ClassifiedError> step_error;  // the traced step raised
  bool traced = false;  // false for model packages (no named modules to trace)
  bool Clean() const { return weights.empty() && inputs.empty() && !step_error; }
};

// The dtype a weight of module `module` should have under `policy` ("fp32", "bf16",
// "uint8" for FP8 codes).
c10::ScalarType ExpectedStoredDtype(const DtypePolicy& policy, ModuleKind kind,
                                    const std::string& module = "");

// Audits the reference pipeline or a model package (spec.model_dir): bad input is a Status.
StatusOr<DtypeAudit> AuditDtypes(const PipelineSpec& spec);

}  // namespace framegate
