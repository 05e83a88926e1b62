// MergeStore: folds one store file (a shard's, a fleet host's) into another. Idempotent:
// merging the same input again adds nothing. A row already in the output that differs
// from the input's (same run_id, or same run_id + cell id, or same device, or same golden
// path + sha256) is a conflict: the output's row is kept, the conflict is counted and
// described in one line. One exception: a run the output still has as "running" takes
// the input's finished/interrupted state (a shard copied before it ended, merged again).
// Each run's new cells go in one transaction, so an interrupted merge can simply be run
// again.
#pragma once

#include <string>
#include <vector>

#include "harness/status.h"
#include "store/result_store.h"

namespace framegate {

struct MergeCounts {
  int runs_added = 0, runs_updated = 0, cells_added = 0, cells_identical = 0;
  int devices_added = 0, goldens_added = 0;
  std::vector<std::string> conflicts;  // "IN.db: run R cell C: status PASS vs FAIL; kept ..."
};

// Reads `input` read-only (an older schema is migrated in memory, never on disk).
// InvalidInput when input and output are the same file.
Status MergeStore(ResultStore& out, const std::string& input, MergeCounts* counts);

}  // namespace framegate
