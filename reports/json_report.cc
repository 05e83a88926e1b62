#include "reports/json_report.h"

#include <fstream>
#include <sstream>

#include "harness/cell_result_json.h"
#include "reports/report_files.h"
#include "reports/run_summary.h"

namespace framegate {
namespace {

using nlohmann::json;

json RunInfoToJson(const RunInfo& i) {
  return {{"run_id", i.run_id},
          {"started_at", i.started_at},
          {"finished_at", i.finished_at},
          {"state", i.state},
          {"host", i.host},
          {"git_sha", i.git_sha},
          {"framegate_version", i.framegate_version},
          {"libtorch_version", i.libtorch_version},
          {"cuda_version", i.cuda_version},
          {"blas", i.blas},
          {"tags", i.tags},
          {"matrix_path", i.matrix_path},
          {"matrix_sha256", i.matrix_sha256},
          {"command", i.command},
          {"shard", i.shard}};
}

RunInfo RunInfoFromJson(const json& j) {
  RunInfo i;
  i.run_id = j.at("run_id").get<std::string>();
  i.started_at = j.at("started_at").get<std::string>();
  i.finished_at = j.at("finished_at").get<std::string>();
  i.state = j.at("state").get<std::string>();
  i.host = j.at("host").get<std::string>();
  i.git_sha = j.at("git_sha").get<std::string>();
  i.framegate_version = j.at("framegate_version").get<std::string>();
  i.libtorch_version = j.at("libtorch_version").get<std::string>();
  i.cuda_version = j.at("cuda_version").get<std::string>();
  i.blas = j.at("blas").get<std::string>();
  i.tags = j.at("tags").get<std::string>();
  i.matrix_path = j.at("matrix_path").get<std::string>();
  i.matrix_sha256 = j.at("matrix_sha256").get<std::string>();
  i.command = j.at("command").get<std::string>();
  i.shard = j.at("shard").get<std::string>();
  return i;
}

json DeviceToJson(const DeviceInfo& d) {
  return {{"device", d.device},
          {"name", d.name},
          {"capability", d.capability},
          {"memory_bytes", d.memory_bytes},
          {"driver", d.driver}};
}

DeviceInfo DeviceFromJson(const json& j) {
  return {j.at("device").get<std::string>(), j.at("name").get<std::string>(),
          j.at("capability").get<std::string>(), j.at("memory_bytes").get<int64_t>(),
          j.at("driver").get<std::string>()};
}

}  // namespace

json RunRecordToJson(const RunRecord& run) {
  json devices = json::array();
  for (const DeviceInfo& d : run.devices) devices.push_back(DeviceToJson(d));
  json cells = json::array();
  for (const CellResult& r : run.cells) cells.push_back(CellResultToJson(r));
  const StatusCounts counts = CountStatuses(run.cells);
  json by_status = json::object();
  for (const auto& [status, n] : counts.by_status) by_status[StatusName(status)] = n;
  return {{"format", "framegate-run"},
          {"format_version", kRunJsonFormatVersion},
          {"run", RunInfoToJson(run.info)},
          {"devices", devices},
          {"summary", {{"cells", counts.total}, {"failures", counts.failures}, {"by_status", by_status}}},
          {"cells", cells}};
}

StatusOr<RunRecord> RunRecordFromJson(const json& j) {
  std::string place = "top level";
  try {
    if (!j.is_object()) return Status::InvalidInput("top level: not a JSON object");
    if (j.at("format").get<std::string>() != "framegate-run") {
      return Status::InvalidInput("format: expected \"framegate-run\"");
    }
    const int version = j.at("format_version").get<int>();
    if (version > kRunJsonFormatVersion) {
      return Status::Unsupported("format_version " + std::to_string(version) +
                                 " is newer than this framegate reads (" +
                                 std::to_string(kRunJsonFormatVersion) + ")");
    }
    RunRecord run;
    place = "run";
    run.info = RunInfoFromJson(j.at("run"));
    place = "devices";
    for (const json& d : j.at("devices")) run.devices.push_back(DeviceFromJson(d));
    const json& cells = j.at("cells");
    if (!cells.is_array()) return Status::InvalidInput("cells: not an array");
    for (size_t i = 0; i < cells.size(); ++i) {
      StatusOr<CellResult> cell = CellResultFromJson(cells[i]);
      if (!cell.ok()) {
        return Status::InvalidInput("cells[" + std::to_string(i) + "]: " + cell.status().message());
      }
      run.cells.push_back(std::move(cell).value());
    }
    return run;
  } catch (const std::exception& e) {
    return Status::InvalidInput(place + ": " + e.what());
  }
}

Status WriteJsonReport(const RunRecord& run, const std::string& path) {
  return WriteFileAtomically(path, RunRecordToJson(run).dump(2) + "\n");
}

StatusOr<RunRecord> ReadJsonReport(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  json parsed;
  try {
    parsed = json::parse(text.str());
  } catch (const json::parse_error& e) {
    return Status::InvalidInput(path + ": not JSON: " + e.what());
  }
  StatusOr<RunRecord> run = RunRecordFromJson(parsed);
  if (!run.ok()) return run.status().WithContext(path);
  return run;
}

}  // namespace framegate
