#include "reports/benchmark_json.h"

#include "reports/markup.h"
#include "reports/report_files.h"
#include "reports/run_summary.h"

namespace framegate {
namespace {

using nlohmann::json;

json Context(const RunRecord& run) {
  json devices = json::array();
  for (const DeviceInfo& d : run.devices) devices.push_back(d.device + ": " + d.name);
  return {{"date", run.info.started_at},
          {"host_name", run.info.host},
          {"executable", "framegate"},
          {"library_build_type", "release"},
          {"framegate_run_id", run.info.run_id},
          {"git_sha", run.info.git_sha},
          {"framegate_version", run.info.framegate_version},
          {"libtorch_version", run.info.libtorch_version},
          {"blas", run.info.blas},
          {"devices", devices}};
}

json Entry(const std::string& name, int family, int repetitions, double milliseconds) {
  return {{"name", name},
          {"family_index", family},
          {"per_family_instance_index", 0},
          {"run_name", name},
          {"repetitions", repetitions},
          {"threads", 1},
          {"real_time", milliseconds},
          {"cpu_time", milliseconds},
          {"time_unit", "ms"}};
}

}  // namespace

std::string BenchmarkName(const Cell& cell) {
  std::string name =
      cell.Pipeline() + "/" + cell.device + "/" + cell.policy + "/seed" + std::to_string(cell.seed);
  for (const auto& [field, text] : VariantFields(cell)) name += "/" + field + ":" + text;
  return name;
}

json BenchmarkJson(const RunRecord& run) {
  json benchmarks = json::array();
  int family = 0;
  for (const CellResult& r : run.cells) {
    const std::vector<double>& seconds = r.timings.generation_seconds;
    if (seconds.empty()) continue;
    const std::string name = BenchmarkName(r.cell);
    const int repetitions = static_cast<int>(seconds.size());
    for (int i = 0; i < repetitions; ++i) {
      json entry = Entry(name, family, repetitions, seconds[i] * 1e3);
      entry["run_type"] = "iteration";
      entry["repetition_index"] = i;
      entry["iterations"] = 1;
      entry["label"] = StatusName(r.status);
      benchmarks.push_back(entry);
    }
    if (repetitions >= 2) {
      const std::pair<const char*, double> aggregates[] = {
          {"mean", Mean(seconds)}, {"median", Median(seconds)}, {"stddev", SampleStddev(seconds)}};
      for (const auto& [aggregate, value] : aggregates) {
        json entry = Entry(name, family, repetitions, value * 1e3);
        entry["name"] = name + "_" + aggregate;
        entry["run_type"] = "aggregate";
        entry["aggregate_name"] = aggregate;
        entry["aggregate_unit"] = "time";
        entry["iterations"] = repetitions;
        entry["label"] = StatusName(r.status);
        benchmarks.push_back(entry);
      }
    }
    ++family;
  }
  return {{"context", Context(run)}, {"benchmarks", benchmarks}};
}

Status WriteBenchmarkJson(const RunRecord& run, const std::string& path) {
  return WriteFileAtomically(path, BenchmarkJson(run).dump(2) + "\n");
}

}  // namespace framegate
