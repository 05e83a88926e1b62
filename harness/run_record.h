// What a run is (provenance) and a finished run as one value: what the store keeps and
// the reports read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/cell_result.h"

namespace framegate {

// A device the run used: "cpu" or "cuda:N", with what identifies the hardware.
struct DeviceInfo {
  std::string device;      // "cpu", "cuda:0"
  std::string name;        // CPU model / GPU name
  std::string capability;  // GPU compute capability "9.0"; CPU ISA features
  int64_t memory_bytes = 0;
  std::string driver;  // GPU driver version, "" on the CPU
};

struct RunInfo {
  std::string run_id;             // unique: "<UTC yyyymmddThhmmssZ>-<8 hex>"
  std::string started_at;         // ISO 8601 UTC
  std::string finished_at;        // "" while running
  std::string state = "running";  // "running", "finished", "interrupted"
  std::string host;
  std::string git_sha;
  std::string framegate_version;
  std::string libtorch_version;
  std::string cuda_version;  // "" without CUDA
  std::string blas;
  std::string tags;         // comma-separated: "nightly", "qualification", "local"
  std::string matrix_path;  // "" for ad-hoc axes
  std::string matrix_sha256;
  std::string command;  // the command line that started the run, shell-quoted (ShellCommand)
  std::string shard;    // "i/n", "" when not sharded
  // The run's options as `--resume` restores them: the words after `framegate run`, as
  // given, plus the defaults that came from the environment. Empty for runs stored
  // before schema version 5.
  std::vector<std::string> argv;
  // What can change under the code, beyond the fields above: a JSON object of strings
  // (harness/build_info.h RunFingerprintJson). "{}" when unknown (runs before schema 6).
  std::string fingerprint = "{}";
};

struct RunRecord {
  RunInfo info;
  std::vector<DeviceInfo> devices;
  std::vector<CellResult> cells;
};

}  // namespace framegate
