// Cell: one unit of work, the plain value that crosses from the matrix to the runner.
// pipeline (reference size or model package) x device x dtype policy x seed, plus the
// sampler overrides and the fault case that make the run. The identity fields hash to a
// stable id, so one cell's history lines up across nights and hosts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace framegate {

struct Cell {
  // Identity (hashed into Id()).
  std::string size = "tiny";  // reference pipeline size; ignored when model_dir is set
  std::string model_dir;      // a TorchScript model package folder
  std::string device = "cpu";
  std::string policy = "fp32";
  uint64_t seed = 0;
  std::string fault;    // fault case name, "" for none
  std::string sampler;  // "ddim" / "euler", "" for the pipeline's default
  int steps = 0;        // 0: the pipeline's default
  double guidance = 0;  // 0: the pipeline's default
  // Not identity: how the cell is judged and scheduled.
  std::string tolerance;  // tolerance profile, "" for the policy's own
  std::string xfail;      // reason the cell is expected to fail, "" if not
  // The TOML file ([policy.NAME] tables: a matrix or a policy file) that defines `policy`
  // when it is not a preset; "" for a preset.
  std::string policy_file;
  std::vector<std::string> requirements;  // matrix `requires`, e.g. "cuda", "bf16": capabilities it needs

  // 16 lowercase hex digits: sha256 of CanonicalString(), truncated.
  std::string Id() const;
  // "v1|pipeline=reference:tiny|device=cpu|policy=fp32|seed=0|fault=|sampler=|steps=0|
  // guidance=0" (one line). A model package is named by its folder's basename, so the
  // same package at another path on another host is the same cell.
  std::string CanonicalString() const;
  // "reference:tiny" or "model:<folder basename>".
  std::string Pipeline() const;
  // "reference:tiny cpu fp16 seed=0" (+ " fault=..." when set), for humans.
  std::string Label() const;
  bool expected_to_fail() const { return !xfail.empty(); }
};

}  // namespace framegate
