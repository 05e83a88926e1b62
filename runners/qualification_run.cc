#include "runners/qualification_run.h"

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "checks/qualification.h"
#include "harness/cell_result_json.h"
#include "matrix/device_discovery.h"
#include "matrix/unsupported.h"
#include "runners/child_process.h"
#include "runners/scratch_folder.h"

namespace framegate {
namespace {

// What a device is compared with for speed: a GPU's model, a CPU kernel path itself.
std::string KindOf(const std::string& device, const std::vector<DeviceInfo>& found) {
  if (device.rfind("cpu", 0) == 0) return device;
  for (const DeviceInfo& d : found) {
    if (d.device == device) return d.name;
  }
  return device;
}

// The cell without its device: what the peers of one cell share.
std::string PeerKey(Cell cell) {
  cell.device = "";
  return cell.Label();
}

// `check --replay` of one cell in its own process; its result.
StatusOr<CellResult> ReplayInProcess(const QualifyOptions& o, const Cell& cell, const std::string& scratch) {
  std::vector<std::string> argv = CheckArgsFor(cell);
  argv.insert(argv.begin(), o.pipeline_executable);
  const std::string json_path = scratch + "/replay.json";
  argv.insert(argv.end(), {"--golden-dir", o.golden_dir, "--threads", std::to_string(o.threads), "--replay",
                           std::to_string(o.repeats), "--json", json_path});
  if (!o.inject_sdc.empty()) argv.insert(argv.end(), {"--inject-sdc", o.inject_sdc});
  std::remove(json_path.c_str());
  const int code = RunProcess(argv, scratch);
  if (code == 2) return Status::InvalidInput(LastLine(scratch + "/stderr"));
  if (code != 0 && code != 1) {
    return Status::Internal("the replay of " + cell.Label() + " failed (exit " + std::to_string(code) +
                            "): " + LastLine(scratch + "/stderr"));
  }
  try {
    const nlohmann::json cells = nlohmann::json::parse(ReadText(json_path)).at("cells");
    return CellResultFromJson(cells.at(0));
  } catch (const std::exception& e) {
    return Status::Internal(json_path + ": cannot read the replay's result: " + e.what());
  }
}

}  // namespace

StatusOr<QualifyOutcome> RunQualification(const QualifyOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<ScratchFolder>> scratch = ScratchFolder::Create(TempDirectory());
  if (!scratch.ok()) return scratch.status();
  const std::vector<DeviceInfo> found = DiscoverDevices();
  QualifyOutcome outcome;
  std::vector<DevicePasses> runs;
  for (const Cell& cell : o.cells) {
    DevicePasses run{cell.device, KindOf(cell.device, found), PeerKey(cell), {}};
    StatusOr<std::string> unsupported = UnsupportedReason(cell, found);
    if (!unsupported.ok()) return unsupported.status();
    if (!unsupported->empty()) {
      run.result.cell = cell;
      run.result.status = CellStatus::kUnsupported;
      run.result.reason = *unsupported;
    } else {
      StatusOr<CellResult> result = ReplayInProcess(o, cell, (*scratch)->path());
      if (!result.ok()) return result.status();
      run.result = std::move(*result);
    }
    if (o.on_progress) {
      o.on_progress(std::string(StatusName(run.result.status)) + "  " + cell.Label() + "  " +
                    std::to_string(run.result.replays.size()) + " passes");
    }
    outcome.results.push_back(run.result);
    runs.push_back(std::move(run));
  }
  outcome.devices = QualifyDevices(runs);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace framegate
