// What `run` (run_command.cc) shares with `report` (report_command.cc): the report
// outputs a run is asked for, the per-device verdict and writing the reports.
#pragma once

#include <ostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/run_record.h"
#include "harness/status.h"
#include "store/result_store.h"

namespace framegate {

// --html DIR, --junit FILE|-, --json FILE|-, --bench-json FILE|-.
struct ReportOutputs {
  std::string html_dir, junit_path, json_path, bench_json_path;
  void AddTo(CLI::App* app);
  // The run's text goes to stderr when one of these goes to stdout.
  std::ostream& Text() const;
  int TextFd() const;
};

// Writes the reports asked for; the first error wins.
Status WriteReports(const RunRecord& run, ResultStore& store, const ReportOutputs& out,
                    const nlohmann::json& device_verdicts);

// The hardware-qualification answer per device: qualified when no cell failed on it.
// Prints it to `out` and returns it as JSON (run.json's "device_verdicts").
nlohmann::json DeviceVerdicts(const RunRecord& run, std::ostream& out);

}  // namespace framegate
