// A matrix: the cells a user cares about (every pipeline x device x policy x seed ...),
// written as TOML (docs/matrix.md) and expanded here into plain Cell values, with the
// settings the runner needs next to them. Discovery only: nothing here runs a cell.
//
// Errors are one line naming the file, line and column and the problem, e.g.
//   matrix/x.toml:12:5: unknown key 'polices' in [axes] (known: pipelines, devices, ...)
// and come back as Status::InvalidInput (NotFound for a missing file): exit 2 in the CLI.
#pragma once

#include <string>
#include <vector>

#include "harness/cell.h"
#include "harness/run_record.h"
#include "harness/status.h"

namespace framegate {

struct MatrixSpec {
  std::string source;          // the path as given, or "matrix/<name>.toml" for a shipped one
  std::string name;            // the file's `name`, else its file name without ".toml"
  std::string description;     // the file's `description`, may be ""
  std::string sha256;          // of the TOML text (RunInfo::matrix_sha256)
  std::vector<Cell> cells;     // expanded: deterministic order, unique ids
  int repeats = 1;             // timed repeats of each cell
  int warmup = 0;              // untimed warm-up runs of each cell before the repeats
  double timeout_seconds = 0;  // wall-clock limit of one cell; 0: the runner's default
};

// Parses `toml_text` (named `source` in errors) and expands it. Model package folders
// are resolved against `base_dir` ("" = the working directory). The device values
// "cuda" and "all" expand against `found` (see docs/matrix.md).
// Every cell's policy is resolved here: the policies the text defines are handed to
// RememberPoliciesOfFile (pipelines/dtype_policy.h) under the path the cells name as
// their policy_file, so FindPolicyIn (and UnsupportedReason) of a cell of this matrix
// finds them in this process without reading the file again.
StatusOr<MatrixSpec> ParseMatrix(const std::string& toml_text, const std::string& source,
                                 const std::string& base_dir, const std::vector<DeviceInfo>& found);

// Reads `path_or_name`: an existing file; else a shipped matrix by name ("smoke") or by
// its repository path ("matrix/smoke.toml"), from the copy compiled into the binary.
// NotFound when it is none of these.
StatusOr<MatrixSpec> LoadMatrix(const std::string& path_or_name, const std::vector<DeviceInfo>& found);

// local, nightly, qualification, smoke.
std::vector<std::string> ShippedMatrixNames();

}  // namespace framegate
