// The one JSON form of a CellResult: `framegate check --json` and `run --json` write it,
// the runner's cell processes hand their result to the parent in it, and the reports
// read it. Non-finite numbers are written as null; read back, a null PSNR or headroom is
// +infinity and any other null metric is NaN.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/cell_result.h"
#include "harness/status.h"

namespace framegate {

nlohmann::json CellResultToJson(const CellResult& result);
// InvalidInput naming the first missing or mistyped key.
StatusOr<CellResult> CellResultFromJson(const nlohmann::json& json);

// The metrics object alone, as `framegate metrics --json` writes it:
// {"frames": [{"psnr": .., "ssim": ..}], "min_psnr": .., "max_abs": .., ...}.
nlohmann::json MetricsToJson(const ComparisonMetrics& metrics);

}  // namespace framegate
