#include "runners/cell_run_options.h"

#include <sstream>

#include "pipelines/dtype_policy.h"
#include "pipelines/fault_cases.h"
#include "pipelines/pipeline_config.h"

namespace framegate {

Status CheckCellNames(const Cell& cell) {
  if (cell.model_dir.empty()) {
    StatusOr<ReferenceSize> size = FindReferenceSize(cell.size);
    if (!size.ok()) return size.status();
  }
  StatusOr<DtypePolicy> policy = FindPolicyIn(cell.policy, cell.policy_file);
  if (!policy.ok()) return policy.status();
  if (!ParseFaultCase(cell.fault)) {
    std::string known;
    for (const FaultCaseInfo& f : FaultCases()) known += (known.empty() ? "" : ", ") + std::string(f.name);
    return Status::InvalidInput("unknown fault case '" + cell.fault + "' (known: " + known + ")");
  }
  if (!cell.sampler.empty() && !ParseSamplerKind(cell.sampler)) {
    return Status::InvalidInput("unknown sampler '" + cell.sampler + "' (known: ddim, euler)");
  }
  return Status::Ok();
}

std::string CheckCommandFor(const Cell& cell, const std::string& golden_dir) {
  std::ostringstream cmd;
  cmd << "framegate check " << (cell.model_dir.empty() ? "--size " + cell.size : "--model " + cell.model_dir)
      << " --device " << cell.device << " --policy " << cell.policy << " --seed " << cell.seed;
  if (!cell.policy_file.empty()) cmd << " --policy-file " << cell.policy_file;
  if (!cell.fault.empty()) cmd << " --fault " << cell.fault;
  if (!cell.sampler.empty()) cmd << " --sampler " << cell.sampler;
  if (cell.steps > 0) cmd << " --steps " << cell.steps;
  if (cell.guidance > 0) cmd << " --guidance " << cell.guidance;
  if (!cell.tolerance.empty() && cell.tolerance != cell.policy) cmd << " --tolerance " << cell.tolerance;
  cmd << " --golden-dir " << golden_dir;
  return cmd.str();
}

}  // namespace framegate
