// `framegate history`: finding cells by a filter over their identity, and the JSON and
// text forms of a cell's history (ResultStore::CellHistory).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"
#include "store/result_store.h"

namespace framegate {

// The ids of the cells whose identity matches every term of `filter`, a comma-separated
// list of KEY=GLOB (SQLite GLOB: * and ? wildcards, case-sensitive), KEY one of cell_id,
// pipeline, size, device, policy, seed, fault, sampler, steps. Example:
// "policy=fp16*,device=cuda:*". At most `max_cells`, ordered by cell id. InvalidInput
// naming the term for an unknown key or a term without '='.
StatusOr<std::vector<std::string>> MatchCellIds(ResultStore& store, const std::string& filter, int max_cells);

nlohmann::json HistoryToJson(const std::string& cell_id, const std::vector<HistoryPoint>& points);
// A header line naming the cell, then one line per run: date, run, git sha, device model,
// status, min_psnr, mean_ssim, rel_l2, median latency and its repeats.
std::string FormatHistory(const std::string& cell_id, const std::vector<HistoryPoint>& points);

}  // namespace framegate
