// MergeStore: folds one store file (a shard's, a fleet host's) into another. Idempotent:
// merging the same input again adds nothing. A row already in the output that differs
// from the input's (same run_id, or same run_id + cell id, or same device, or same run_id +
// qualified device, or same golden path + sha256) is a conflict: the output's row is kept, the conflict is
// counted and described in one line. One exception: a run the output still has as "running" takes the input's
// finished/interrupted state (a shard copied before it ended, merged again). Each run's new cells go in one
// transaction, so an interrupted merge can simply be run again.
#pragma once

#include <string>
#include <vector>

#include "harness/status.h"
#include "store/result_store.h"

namespace framegate {

struct MergeCounts {
  int runs_added = 0, runs_updated = 0, cells_added = 0, cells_identical = 0;
  int devices_added = 0, goldens_added = 0;
  int qualifications_added = 0;        // device verdicts of `framegate qualify` runs
  std::vector<std::string> conflicts;  // "IN.db: run R cell C: status PASS vs FAIL; kept ..."
};

// Whether `input` can be merged into the file at `out_path` without hiding a result. Reads
// only. InvalidInput when input and output are the same file; Corrupt naming the input,
// the run and the cell when one run of the input holds two results for one cell id (a
// hand-made file without the cells table's UNIQUE (run_id, cell_id), or an older-schema
// file whose rows migrate to one id): merged, the second would replace the first, a FAIL
// become a PASS with no conflict; Corrupt naming the input when a cells row refers to a
// missing run or cell_specs row (it would not be read, so not merged). Also the errors of
// opening it read-only.
Status CheckMergeInput(const std::string& out_path, const std::string& input);

// Checks `input` (CheckMergeInput: when refused, `out` is not written), then merges it.
// Reads `input` read-only (an older schema is migrated in memory, never on disk).
Status MergeStore(ResultStore& out, const std::string& input, MergeCounts* counts);

// `framegate merge`: checks every input first and creates or opens `out_path` only when
// all of them pass, so a refused input leaves the output as it was (or absent); then
// merges them in order.
StatusOr<MergeCounts> MergeStores(const std::string& out_path, const std::vector<std::string>& inputs);

}  // namespace framegate
