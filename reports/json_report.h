// The run as one JSON document: `framegate report --json` and `run --json` write it, and
// framegate_render_report reads it back. Layout (format_version 1):
//   {"format": "framegate-run", "format_version": 1,
//    "run": {run_id, started_at, finished_at, state, host, git_sha, framegate_version,
//            libtorch_version, cuda_version, blas, tags, matrix_path, matrix_sha256,
//            command, shard},
//    "devices": [{device, name, capability, memory_bytes, driver}],
//    "summary": {"cells": N, "failures": F, "by_status": {"PASS": n, ...}},
//    "cells": [<CellResultToJson>, ...]}          // run order
// "summary" is derived: it is written, and ignored when read.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/run_record.h"
#include "harness/status.h"

namespace framegate {

constexpr int kRunJsonFormatVersion = 1;

nlohmann::json RunRecordToJson(const RunRecord& run);
// InvalidInput naming the place of the first problem ("cells[3]: cell result JSON: ...",
// "run: key 'host' not found"); Unsupported for a newer format_version.
StatusOr<RunRecord> RunRecordFromJson(const nlohmann::json& json);

// Writes RunRecordToJson (2-space indent) to `path` atomically (temporary + rename).
// IoError naming the path.
Status WriteJsonReport(const RunRecord& run, const std::string& path);
// Reads a file written by WriteJsonReport; errors are prefixed with the path.
StatusOr<RunRecord> ReadJsonReport(const std::string& path);

}  // namespace framegate
