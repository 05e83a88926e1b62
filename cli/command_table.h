// The commands the front executable (build/bin/framegate) does not serve itself: it
// passes them to the pipeline executable (libexec/framegate/framegate-pipeline), which
// loads LibTorch and serves every command. Their one-line descriptions live here only:
// the front lists them in `framegate --help`, the pipeline executable shows them.
#pragma once

#include <string>
#include <vector>

namespace framegate {

struct PassThroughCommand {
  const char* name;
  const char* summary;  // "" for a hidden command (not listed by --help)
};

// `list`'s, which is one of them in a CUDA build (list_command.cc uses it).
constexpr const char* kListSummary =
    "List a matrix's cells and which are UNSUPPORTED here, without running anything";

// `run`'s, which is one of them in a CUDA build (run_command.cc uses it).
constexpr const char* kRunSummary =
    "Run a matrix (default: local) into the SQLite store, each cell isolated from this "
    "process (a crash or hang is that cell's CRASH or TIMEOUT)";

// In a CUDA build `list` and `run` are among them: counting the GPUs needs the CUDA runtime that
// LibTorch links, so the front does not link the matrix library there.
const std::vector<PassThroughCommand>& PassThroughCommands();

// The pipeline executable, relative to the running one (/proc/self/exe):
// BIN/../libexec/framegate/framegate-pipeline, in the build tree and after an install;
// the running one when it is the pipeline executable.
std::string PipelineExecutablePath();

}  // namespace framegate
