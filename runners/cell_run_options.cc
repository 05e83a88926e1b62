#include "runners/cell_run_options.h"

#include "harness/shell_quote.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/fault_cases.h"
#include "pipelines/pipeline_config.h"

namespace framegate {

StatusOr<CellNames> ResolveCellNames(const Cell& cell) {
  if (cell.model_dir.empty()) {
    StatusOr<ReferenceSize> size = FindReferenceSize(cell.size);
    if (!size.ok()) return size.status();
  }
  CellNames names;
  StatusOr<DtypePolicy> policy = FindPolicyIn(cell.policy, cell.policy_file);
  if (!policy.ok()) return policy.status();
  names.policy = *policy;
  const std::optional<FaultCase> fault = ParseFaultCase(cell.fault);
  if (!fault) {
    std::string known;
    for (const FaultCaseInfo& f : FaultCases()) known += (known.empty() ? "" : ", ") + std::string(f.name);
    return Status::InvalidInput("unknown fault case '" + cell.fault + "' (known: " + known + ")");
  }
  names.fault = *fault;
  if (!cell.sampler.empty()) {
    names.sampler = ParseSamplerKind(cell.sampler);
    if (!names.sampler)
      return Status::InvalidInput("unknown sampler '" + cell.sampler + "' (known: ddim, euler)");
  }
  return names;
}

StatusOr<ToleranceProfile> ToleranceOf(const Cell& cell, const CellNames& names) {
  return FindToleranceProfile(cell.tolerance.empty() ? names.policy.ToleranceProfileName() : cell.tolerance);
}

Status CheckCellResolves(const Cell& cell) {
  StatusOr<CellNames> names = ResolveCellNames(cell);
  if (!names.ok()) return names.status();
  return ToleranceOf(cell, *names).status();
}

std::string CheckCommandFor(const Cell& cell, const std::string& golden_dir) {
  std::vector<std::string> words = CheckArgsFor(cell);
  words.insert(words.begin(), "framegate");
  if (!golden_dir.empty()) words.insert(words.end(), {"--golden-dir", golden_dir});
  return ShellCommand(words);
}

}  // namespace framegate
