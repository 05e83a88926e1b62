#include "runners/matrix_run.h"

#include <set>

#include "checks/verdict.h"
#include "harness/shell_quote.h"
#include "matrix/matrix_spec.h"
#include "matrix/shard.h"
#include "matrix/unsupported.h"
#include "runners/cell_run_options.h"

namespace framegate {
namespace {

// The request's matrix, expanded. Every cell must resolve (its names and its tolerance
// profile) before anything runs: a name that does not resolve is bad input, never a
// cell's status.
StatusOr<MatrixSpec> ExpandRequest(const MatrixRunRequest& request) {
  MatrixSpec spec;
  if (request.adhoc) {
    spec.source = "(ad-hoc axes)";
    spec.name = "ad-hoc";
    spec.cells = request.adhoc_cells;
  } else {
    StatusOr<MatrixSpec> loaded = LoadMatrix(request.matrix, request.found);
    if (!loaded.ok()) return loaded.status();
    spec = std::move(*loaded);
  }
  for (const Cell& c : spec.cells) {
    const Status resolves = CheckCellResolves(c);
    if (!resolves.ok()) return request.adhoc ? resolves : resolves.WithContext(spec.source);
  }
  return spec;
}

// The run to begin: a new one from the request, or the stored one --resume names after
// checking that this is the same matrix and shard.
StatusOr<RunInfo> RunToBegin(const MatrixRunRequest& request, const MatrixSpec& spec, ResultStore& store) {
  if (request.resume_run_id.empty()) {
    RunInfo info = request.new_run;
    info.matrix_path = request.adhoc ? "" : spec.source;
    info.matrix_sha256 = spec.sha256;
    info.shard = request.shard;
    return info;
  }
  StatusOr<RunInfo> stored = store.LoadRunInfo(request.resume_run_id);
  if (!stored.ok()) return stored.status();
  const std::string where = "--resume " + request.resume_run_id + ": ";
  if (stored->matrix_sha256 != spec.sha256) {
    return Status::InvalidInput(where + "the matrix " + spec.source +
                                " is not the one the run began with (sha256 " + spec.sha256.substr(0, 12) +
                                ", stored " + stored->matrix_sha256.substr(0, 12) + ")");
  }
  if (request.shard != stored->shard) {
    const auto name = [](const std::string& shard) {
      return shard.empty() ? "the whole matrix" : "shard " + shard;
    };
    return Status::InvalidInput(where + "runs " + name(request.shard) + ", the run is " +
                                name(stored->shard));
  }
  RunInfo info = *stored;
  info.state = "running";
  info.finished_at = "";
  return info;
}

// The found devices that some cell uses.
std::vector<DeviceInfo> DevicesUsed(const std::vector<DeviceInfo>& found, const std::vector<Cell>& cells) {
  std::vector<DeviceInfo> used;
  for (const DeviceInfo& d : found) {
    for (const Cell& c : cells) {
      if (c.device == d.device) {
        used.push_back(d);
        break;
      }
    }
  }
  return used;
}

// How cells run: the request's settings completed from the matrix.
CellProcessOptions ProcessOptionsFor(const MatrixRunRequest& request, const MatrixSpec& spec,
                                     const std::string& run_id) {
  CellProcessOptions p = request.process;
  CellRunOptions& cell = p.settings.run;
  cell.artifacts_dir = request.artifacts_root + "/" + run_id;
  cell.repeats = request.repeats > 0 ? request.repeats : spec.repeats;
  cell.warmup = request.warmup >= 0 ? request.warmup : spec.warmup;
  p.timeout_seconds = request.timeout_seconds > 0 ? request.timeout_seconds
                                                  : (spec.timeout_seconds > 0 ? spec.timeout_seconds : 600);
  return p;
}

// Records the cells not recorded yet that cannot run here as UNSUPPORTED (the verdict
// decides, with the expected-failure flip) and returns the ones to run.
StatusOr<std::vector<Cell>> RecordUnsupported(const std::vector<Cell>& cells,
                                              const std::set<std::string>& done,
                                              const MatrixRunRequest& request,
                                              const std::function<Status(const CellResult&)>& record) {
  std::vector<Cell> to_run;
  for (const Cell& c : cells) {
    if (done.count(c.Id())) continue;
    // Every cell resolved before the run began (ExpandRequest): a lookup error here is
    // still bad input, never a reason.
    const StatusOr<std::string> unsupported = UnsupportedReason(c, request.found);
    if (!unsupported.ok()) return unsupported.status();
    if (unsupported->empty()) {
      to_run.push_back(c);
      continue;
    }
    VerdictInputs in;
    in.run = RunEnd::kUnsupported;
    in.unsupported = unsupported.value();
    in.expected_to_fail = c.expected_to_fail();
    CellResult r = JudgedResult(c, DecideVerdict(in));
    r.repro = CheckCommandFor(c, request.process.settings.run.golden_dir);
    FG_RETURN_IF_ERROR(record(r));
  }
  return to_run;
}

// Runs the begun run's cells; `error` is returned after the run is stored interrupted.
StatusOr<MatrixRunOutcome> RunBegunRun(const MatrixRunRequest& request, const MatrixSpec& spec,
                                       const std::vector<Cell>& cells, const RunInfo& info,
                                       ResultStore& store, const MatrixRunObservers& observers,
                                       const std::atomic<bool>* stop) {
  const auto interrupted = [&](const Status& error) {
    store.FinishRun(info.run_id, "interrupted", NowIso8601());  // best effort: `error` wins
    return error;
  };
  StatusOr<std::set<std::string>> done = store.FinishedCellIds(info.run_id);
  if (!done.ok()) return interrupted(done.status());
  const auto record = [&](const CellResult& r) -> Status {
    FG_RETURN_IF_ERROR(store.RecordCell(info.run_id, r));
    if (observers.on_recorded) observers.on_recorded(r);
    return Status::Ok();
  };
  StatusOr<std::vector<Cell>> to_run = RecordUnsupported(cells, *done, request, record);
  if (!to_run.ok()) return interrupted(to_run.status());
  const CellStarted on_started = [&](const Cell& c) {
    if (observers.on_started) observers.on_started(c);
  };
  StatusOr<MatrixRunSummary> summary =
      RunCells(*to_run, ProcessOptionsFor(request, spec, info.run_id), on_started, record, stop);
  if (!summary.ok()) return interrupted(summary.status());
  if (!summary->blas.empty()) {
    const Status blas = store.RecordRunBlas(info.run_id, summary->blas);
    if (!blas.ok()) return interrupted(blas);
  }
  FG_RETURN_IF_ERROR(
      store.FinishRun(info.run_id, summary->interrupted ? "interrupted" : "finished", NowIso8601()));
  MatrixRunOutcome outcome;
  StatusOr<RunInfo> stored = store.LoadRunInfo(info.run_id);
  if (!stored.ok()) return stored.status();
  outcome.run = *stored;
  outcome.cells_run = summary->finished;
  outcome.interrupted = summary->interrupted;
  outcome.harness_error = summary->harness_error;
  return outcome;
}

}  // namespace

std::string RunCommandLine(const std::vector<std::string>& words) {
  std::vector<std::string> command = {"framegate", "run"};
  command.insert(command.end(), words.begin(), words.end());
  return ShellCommand(command);
}

std::string ResumeCommandLine(const RunInfo& run) {
  return run.command + " --resume " + ShellQuote(run.run_id);
}

StatusOr<MatrixRunPlan> PlanMatrixRun(const MatrixRunRequest& request) {
  StatusOr<MatrixSpec> spec = ExpandRequest(request);
  if (!spec.ok()) return spec.status();
  MatrixRunPlan plan;
  plan.spec = std::move(*spec);
  plan.cells = plan.spec.cells;
  if (!request.shard.empty()) {
    StatusOr<ShardSpec> shard = ParseShard(request.shard);
    if (!shard.ok()) return shard.status();
    plan.cells = ShardCells(plan.cells, shard->index, shard->count);
  }
  return plan;
}

StatusOr<MatrixRunOutcome> RunMatrixIntoStore(const MatrixRunRequest& request, const MatrixRunPlan& plan,
                                              ResultStore& store, const MatrixRunObservers& observers,
                                              const std::atomic<bool>* stop) {
  StatusOr<RunInfo> info = RunToBegin(request, plan.spec, store);
  if (!info.ok()) return info.status();
  FG_RETURN_IF_ERROR(store.BeginRun(*info, DevicesUsed(request.found, plan.cells)));
  if (observers.on_begun) observers.on_begun(*info, static_cast<int>(plan.cells.size()));
  return RunBegunRun(request, plan.spec, plan.cells, *info, store, observers, stop);
}

}  // namespace framegate
