// What a cell run is asked to do, and the names a cell must resolve, without LibTorch:
// the matrix runner (matrix_runner.h, which the LibTorch-free `framegate run` links)
// hands these to the cell processes; cell_runner.h runs them.
#pragma once

#include <optional>
#include <string>

#include "checks/tolerance.h"
#include "harness/cell.h"
#include "harness/status.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/fault_cases.h"
#include "pipelines/pipeline_config.h"

namespace framegate {

struct CellRunCache;  // cell_runner.h: models and goldens a worker keeps

struct CellRunOptions {
  std::string golden_dir;  // where goldens are looked up (GoldenStore)
  // Module range probes (headroom to overflow) on the judged run. Off by default: they
  // cost about 50% of a tiny cell (docs/benchmarks.md). NaN localisation is always on and
  // free for healthy cells: a cell whose latents or frames went non-finite is run once
  // more with every module output watched, to name the first (step, module).
  bool probes = false;
  int warmup = 0;   // untimed runs before the judged one
  int repeats = 1;  // timed runs; the first is the judged one (with probes)
  // Also run the config in FP64 on the CPU: fp64_error_ratio = error(candidate, fp64) /
  // error(golden, fp64), relative L2 of the frames (PyTorch's "no worse than k times
  // FP32's own error" criterion). Needs the golden.
  bool fp64_ref = false;
  // Judge by the model's calibration beside its golden when there is one that matches
  // (runners/cell_bound.h); false: by the profiles (`calibrate` measuring, `check
  // --ignore-calibration`).
  bool use_calibration = true;
  std::string artifacts_dir;  // when set: frames.npy and latents.npy of the candidate
  // Step replay (`check --replay N`): N teacher-forced passes from the golden's
  // trajectory instead of the free runs (CellResult::replays); the cell is judged by the
  // first pass. 0: free runs.
  int replays = 0;
  // Silent corruption injected into the replay passes (pipelines/sdc_injection.h's
  // grammar; "" none): applied when this process's device is the spec's.
  std::string inject_sdc;
  int probe_count = 8;  // least-headroom modules kept in the result
  // Search every passing package cell for an error a few small modules make (runners/
  // cell_bound.h), not only one using kMadeInModulesBandShare of its bound: `advise` judges
  // its islands so, since islands that pass just inside that share at one seed FAIL past
  // it at the next.
  bool made_in_at_any_share = false;
  // A FAIL or BROKEN_FRAMES cell whose latents and frames stayed finite is run once more,
  // watched, for a NaN/Inf a later op absorbed (a norm's x^2 past FP16's range, then
  // rsqrt(inf) = 0): CellResult::first_nonfinite names it. `advise` turns it off for its
  // island runs (its own run has the probes, which see it).
  bool localise_absorbed_nonfinite = true;
  // A passing FP16-emulated package cell that held a value past half FP16's largest is
  // run once more with FP16's range 1 bit smaller (DtypePolicy::fp16_headroom_bits), and
  // FAILs unless that run passes too: other inputs may overflow. `advise` turns it off
  // for its island runs, which it checks with 2 bits.
  bool check_fp16_headroom = true;
  // Models and goldens kept across cells; null: a cache for this cell only (its warmup,
  // repeats and reruns still share one model).
  CellRunCache* cache = nullptr;
};

// What every cell process of one run shares (the runner passes it on the command line).
struct CellProcessSettings {
  CellRunOptions run;  // artifacts_dir and cache are per cell
  int threads = 0;     // LibTorch threads (0: every core this process may use)
  bool deterministic = false;
};

// A cell process's result.json also names, under this key, the BLAS library that process
// loaded: the LibTorch-free runner records it as the run's.
constexpr const char* kProcessBlasKey = "process_blas";

// A cell's names resolved, as far as the LibTorch-free runner can without reading a model
// package: ResolveCellNames is the one place a cell's names are looked up (the cell
// process's ResolveCell, cell_runner.h, builds on it).
struct CellNames {
  DtypePolicy policy;                  // the preset, or the [policy.NAME] of cell.policy_file
  FaultCase fault = FaultCase::kNone;  // cell.fault
  std::optional<SamplerKind> sampler;  // cell.sampler; nullopt: the pipeline's own
};

// The names of `cell` resolved: its reference size (unless it names a package), policy,
// fault case and sampler; InvalidInput naming the bad value.
StatusOr<CellNames> ResolveCellNames(const Cell& cell);

// The tolerance profile that judges `cell`: cell.tolerance, else its policy's.
StatusOr<ToleranceProfile> ToleranceOf(const Cell& cell, const CellNames& names);

// Ok when `cell` can be run and judged: its names and its tolerance profile resolve.
Status CheckCellResolves(const Cell& cell);

// The one command that reruns `cell` alone and judges it.
std::string CheckCommandFor(const Cell& cell, const std::string& golden_dir);

}  // namespace framegate
