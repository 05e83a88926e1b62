// GoldenStore: a folder of golden files (golden_file.h) plus MANIFEST.json, which records
// each file's sha256 and provenance. A golden is keyed by the pipeline config that makes
// it (GoldenKey), never by the policy or device under test: every cell of one config is
// judged against the same FP32 reference.
//
//   DIR/<pipeline>-seed<seed>-<config hash, 8 hex>.safetensors
//   DIR/MANIFEST.json  {"format_version": 1, "goldens": {"<file name>": {"sha256": ..,
//                       "config": .., "config_hash": .., "framegate_version": .., ...}}}
#pragma once

#include <string>
#include <vector>

#include "golden/golden_file.h"
#include "harness/status.h"
#include "pipelines/pipeline_run.h"

namespace framegate {

// What a golden depends on: the model (for a package: the sha256 of its two modules, so
// a changed model no longer matches; for the reference: its weights' seed and the fault
// case built into it, since a fault case is another model whose FP32 output is its own
// reference), the sampler and the seed. Never the policy or the device under test.
struct GoldenKey {
  std::string pipeline;  // "reference:tiny" / "model:<folder basename>"
  std::string weights;   // "seed=0" (reference) / "denoiser=<sha16>,decoder=<sha16>"
  std::string fault;     // reference fault case, "" for none
  SamplerConfig sampler;
  uint64_t seed = 0;

  // "golden-v1|pipeline=reference:tiny|weights=seed=0|sampler=ddim|steps=8|guidance=5|seed=0"
  // (with "|fault=<name>" after the weights when there is a fault case)
  std::string CanonicalString() const;
  std::string Hash() const;  // sha256 of CanonicalString()
  // "reference-tiny-seed0-1a2b3c4d.safetensors" ("reference-tiny-attn-overflow-seed0-..."
  // with a fault), path-safe.
  std::string FileName() const;
};

// The key of a spec's config (its sampler resolved to the size's or package's default).
// NotFound/InvalidInput for an unknown size or a broken package.
StatusOr<GoldenKey> GoldenKeyOf(const PipelineSpec& spec);

// How `stored` differs from `made` (a golden of the same config made again): "" when its
// frames, latents and steps are the same, value for value; else the first that differs
// ("its frames differ from this run's by up to 2.4e-07", "it has no steps (format
// version 1)", "its latents have another shape").
std::string GoldenDifference(const Golden& stored, const Golden& made);

// The options that select `spec`'s config on a command line, but its seed: --size or
// --model, then --weight-seed, --fault and the sampler where they are set.
std::vector<std::string> ConfigArguments(const PipelineSpec& spec);
// The command line that makes the golden of `spec` into `dir`.
std::string GoldenMakeCommand(const PipelineSpec& spec, const std::string& dir);

class GoldenStore {
 public:
  explicit GoldenStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string PathFor(const GoldenKey& key) const { return dir_ + "/" + key.FileName(); }

  struct Made {
    std::string path;
    // The folder held an intact golden of this config with the same frames, latents and
    // trajectory, value for value: that file is kept as it was (its sha256, which a model's
    // calibration names, and its date), not rewritten.
    bool kept = false;
    // Why the golden stored before was replaced ("" when there was none, or it was kept):
    // "it could not be read: ..." or GoldenDifference's words.
    std::string replaced;
  };
  // Runs `spec` in FP32 on spec.device (the reference device), writes the golden and
  // its manifest entry (under a lock on the manifest: processes may make goldens into one
  // folder at once), unless it is kept (above); a stored golden that differs, is damaged
  // or lacks the trajectory is replaced. InvalidInput for a non-FP32 policy;
  // Internal when the FP32 run itself fails or is not finite.
  StatusOr<Made> Make(const PipelineSpec& spec, const std::string& command) const;

  // Loads the golden of `key`: NotFound (with the make command in the message) when
  // there is none; Corrupt naming the file when its sha256 differs from the manifest's,
  // the file is damaged, or its config is not `key`'s.
  StatusOr<Golden> Load(const GoldenKey& key) const;

  struct Entry {
    std::string file;
    std::string sha256;
    GoldenProvenance provenance;
  };
  // The manifest's entries, sorted by file name. Corrupt naming MANIFEST.json when it is
  // not valid; an empty list when the folder has no manifest.
  StatusOr<std::vector<Entry>> List() const;
  // Verifies every golden: present, sha256 as recorded, readable, config hash consistent
  // with its config and its file name. One problem per line in `problems`.
  Status CheckAll(std::vector<std::string>* problems) const;

 private:
  std::string ManifestPath() const { return dir_ + "/MANIFEST.json"; }
  Status AddToManifest(const Entry& entry) const;
  std::string dir_;
};

}  // namespace framegate
