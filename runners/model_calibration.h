// The calibrate use case (`framegate calibrate`): measures one model's FP32 noise floor
// and each policy's error against its goldens, and writes them beside the goldens
// (checks/calibration.h) with their provenance. The verdict then judges the model's cells
// by them (runners/cell_bound.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checks/calibration.h"
#include "harness/cell.h"
#include "harness/status.h"

namespace framegate {

struct CalibrateOptions {
  // The config: size or model_dir, steps, sampler, guidance, fault; policy, seed and
  // device are the calibration's own.
  Cell config;
  std::vector<std::string> policies;  // measured each over every seed
  std::string policy_file;            // defines those that are not presets ("" for none)
  std::vector<uint64_t> seeds;        // the goldens of the missing ones are made
  std::string golden_dir;
  // The FP32 noise floor: the golden config of seeds[0] rerun in other processes with
  // 1 and `threads` LibTorch threads on the CPU, and on each other CPU kernel path this
  // CPU has (cpu:avx2, ...), by `pipeline_executable check`.
  int threads = 1;
  std::string pipeline_executable;
  std::function<void(const std::string& line)> on_progress;  // one line per measurement
};

struct CalibrationOutcome {
  Calibration calibration;
  std::string path;                       // where it was written
  std::vector<std::string> goldens_made;  // the goldens that were missing
  // Policies whose measured worst the shipped profile would FAIL: calibrating makes
  // their error the model's normal, so the user is told ("bf16: min_psnr 35.9 < 40").
  std::vector<std::string> looser_than_profile;
  double seconds = 0;
};

// InvalidInput naming the bad value (an unknown size, policy, package); IoError when a
// file cannot be written; Internal when a noise-floor rerun fails.
StatusOr<CalibrationOutcome> CalibrateModel(const CalibrateOptions& options);

}  // namespace framegate
