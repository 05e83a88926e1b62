#include "runners/qualification_run.h"

#include <chrono>

#include "checks/qualification.h"
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
      std::vector<std::string> args = {"--golden-dir", o.golden_dir,
                                       "--threads",    std::to_string(o.threads),
                                       "--replay",     std::to_string(o.repeats)};
      if (!o.inject_sdc.empty()) args.insert(args.end(), {"--inject-sdc", o.inject_sdc});
      StatusOr<CellResult> result = RunCheckProcess(o.pipeline_executable, cell, args, (*scratch)->path());
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
