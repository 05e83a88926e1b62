// The one JSON form of a CellResult: `framegate check --json` and `run --json` write it,
// the runner's cell processes hand their result to the parent in it, and the reports
// read it. JSON has no NaN/Inf: an infinite PSNR (identical frames) is null, any other
// non-finite number is the string "NaN", "Infinity" or "-Infinity"; all read back exactly.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/cell_result.h"
#include "harness/status.h"

namespace framegate {

nlohmann::json CellResultToJson(const CellResult& result);
// The cell's own fields (cell_id, pipeline, size, model_dir, device, policy, seed, fault,
// sampler, steps, guidance, tolerance, xfail, requires): the first keys of a result.
nlohmann::json CellToJson(const Cell& cell);
// The advisor's answer (harness/cell_result.h); AdviceFromJson throws on a malformed one.
nlohmann::json AdviceToJson(const Advice& advice);
Advice AdviceFromJson(const nlohmann::json& json);
StatusOr<Cell> CellFromJson(const nlohmann::json& json);
// InvalidInput naming the first missing or mistyped key.
StatusOr<CellResult> CellResultFromJson(const nlohmann::json& json);

// The metrics object alone, as `framegate metrics --json` writes it:
// {"frames": [{"psnr": .., "ssim": ..}], "min_psnr": .., "max_abs": .., ...}.
nlohmann::json MetricsToJson(const ComparisonMetrics& metrics);

}  // namespace framegate
