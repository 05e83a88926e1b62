// framegate run-cell (hidden): the matrix runner's cell process. One cell, its result as
// JSON in --result (written atomically); with --worker, cell after cell as the runner
// asks (runners/cell_worker.h).
#include "cli/commands.h"
#include "runners/cell_worker.h"

namespace framegate {
namespace {

struct RunCellOptions {
  std::string cell_path, result_path, artifacts_dir;
  bool worker = false;
  CellProcessSettings settings;
};

int RunCellCommand(const RunCellOptions& o) {
  if (o.worker) return ServeCells(o.settings);
  return RunCellFile(o.cell_path, o.result_path, o.artifacts_dir, o.settings, nullptr);
}

}  // namespace

Command AddRunCellCommand(CLI::App& parent) {
  auto o = std::make_shared<RunCellOptions>();
  CLI::App* app = parent.add_subcommand("run-cell", "");  // hidden: the runner's cell process
  app->group("");
  CLI::Option* worker = app->add_flag("--worker", o->worker);
  app->add_option("--cell", o->cell_path)->excludes(worker);
  app->add_option("--result", o->result_path)->excludes(worker);
  app->add_option("--artifacts", o->artifacts_dir)->excludes(worker);
  app->add_option("--golden-dir", o->settings.run.golden_dir)->required();
  app->add_option("--threads", o->settings.threads);
  app->add_option("--repeats", o->settings.run.repeats);
  app->add_option("--warmup", o->settings.run.warmup);
  app->add_flag("--deterministic", o->settings.deterministic);
  app->add_flag("--fp64-ref", o->settings.run.fp64_ref);
  app->add_flag("--probes", o->settings.run.probes);
  app->callback([app, o] {
    if (!o->worker && (o->cell_path.empty() || o->result_path.empty())) {
      throw CLI::ValidationError("run-cell", "needs --cell and --result, or --worker");
    }
  });
  return {app, [o] { return RunCellCommand(*o); }};
}

}  // namespace framegate
