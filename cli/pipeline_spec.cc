// PipelineCliOptions::ToSpec: the LibTorch side of pipeline_options.h.
#include "cli/commands.h"
#include "runners/cell_runner.h"

namespace framegate {

StatusOr<PipelineSpec> PipelineCliOptions::ToSpec() const {
  const std::vector<Cell> cells = ToCells();
  if (cells.size() != 1)
    return Status::InvalidInput("--policy: give exactly one policy, not '" + policy + "'");
  StatusOr<CellNames> names = ResolveCellNames(cells[0]);
  if (!names.ok()) return names.status();
  StatusOr<PipelineSpec> spec = PipelineSpecOf(cells[0], *names);
  if (spec.ok()) spec->weight_seed = weight_seed;
  return spec;
}

}  // namespace framegate
