// Cell timings as Google Benchmark JSON, so that Google Benchmark's own
// tools/compare.py (`compare.py benchmarks A.json B.json`) compares two framegate runs.
//   {"context": {"date", "host_name", "executable": "framegate", "library_build_type",
//                "framegate_run_id", "git_sha", "framegate_version", "libtorch_version",
//                "blas", "devices"},
//    "benchmarks": [ per cell with timed repeats, in run order:
//      one entry per repeat: {"name", "family_index", "per_family_instance_index",
//        "run_name", "run_type": "iteration", "repetitions", "repetition_index",
//        "threads": 1, "iterations": 1, "real_time", "cpu_time", "time_unit": "ms",
//        "label": "<STATUS>"},
//      then, when there are 2 or more repeats (as Google Benchmark does), the aggregates
//      "<name>_mean", "_median", "_stddev": {"run_type": "aggregate", "aggregate_name",
//        "aggregate_unit": "time", "iterations": <repeats>, ...}]}
// name: "<pipeline>/<device>/<policy>/seed<N>" plus "/fault:<f>", "/sampler:<s>",
// "/steps:<n>", "/guidance:<g>" when set, e.g. "reference:tiny/cpu/fp16/seed0".
// Times are a repeat's generation time (sampler + decode) in milliseconds; framegate
// measures wall time only, so cpu_time repeats real_time. Cells without timed repeats
// (ERROR, UNSUPPORTED, ...) have no entry.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/run_record.h"
#include "harness/status.h"

namespace framegate {

std::string BenchmarkName(const Cell& cell);
nlohmann::json BenchmarkJson(const RunRecord& run);
// Writes BenchmarkJson (2-space indent) atomically. IoError naming the path.
Status WriteBenchmarkJson(const RunRecord& run, const std::string& path);

}  // namespace framegate
