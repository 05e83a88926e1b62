// The `framegate` subcommands that run a pipeline (the pipeline executable, main.cc, which
// links LibTorch and also serves every command of cli/command.h). Each Add*Command
// registers its options on the parent app and returns the function that runs it once
// parsed; exit codes as in cli/command.h.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "cli/pipeline_options.h"
#include "harness/cell.h"
#include "harness/run_record.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

Command AddAdviseCommand(CLI::App& parent);
Command AddAuditCommand(CLI::App& parent);
Command AddCalibrateCommand(CLI::App& parent);
Command AddDevicesCommand(CLI::App& parent);
Command AddGenerateCommand(CLI::App& parent);
Command AddCheckCommand(CLI::App& parent);
Command AddGoldenCommand(CLI::App& parent);
Command AddInfoCommand(CLI::App& parent);
Command AddRunCellCommand(CLI::App& parent);
Command AddQualifyCommand(CLI::App& parent);

// PipelineCliOptions::ToSpec is defined in pipeline_spec.cc (it resolves with LibTorch).

}  // namespace framegate
