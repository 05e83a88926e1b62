// A golden: the FP32 output of one pipeline config on the reference device, in one
// self-describing file. The format is safetensors (readable by the `safetensors` Python
// package, or with 10 lines of numpy):
//   u64 little-endian N | N bytes of JSON header | raw tensor data
// The header has the tensors "frames" (F32 [T, H, W, 3], values in [0, 1]) and
// "latents" (F32 [1, C, T, h, w]) and, from format_version 2, "trajectory" (F32
// [S + 1, 1, C, T, h, w]: the latents before step 0 and after each sampler step, what
// step replay starts each step from and judges it by) with their data_offsets, and "__metadata__" (string
// values only, as safetensors requires):
//   format "framegate-golden", format_version "2", config (GoldenKey canonical string),
//   config_hash, framegate_version, libtorch_version, blas, device, command, created_at.
// Data is little-endian, C order: frames, latents, trajectory.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "golden/golden_format.h"
#include "harness/status.h"

namespace framegate {

struct GoldenProvenance {
  std::string config;       // GoldenKey::CanonicalString() of what produced it
  std::string config_hash;  // sha256 of `config`
  std::string framegate_version;
  std::string libtorch_version;
  std::string blas;
  std::string device;  // "cpu: <model>" / "cuda:0: <name>"
  std::string command;
  std::string created_at;  // ISO 8601 UTC
};

// The provenance as a JSON object of strings (the golden's metadata and its manifest
// entry use the same keys). Reading never throws: a missing or non-string value is "".
nlohmann::json ProvenanceToJson(const GoldenProvenance& provenance);
GoldenProvenance ProvenanceFromJson(const nlohmann::json& json);

struct Golden {
  at::Tensor frames;      // [T, H, W, 3] float32, CPU
  at::Tensor latents;     // [1, C, T, h, w] float32, CPU
  at::Tensor trajectory;  // [S + 1, 1, C, T, h, w] float32, CPU; undefined in a version 1 golden
  GoldenProvenance provenance;
};

// Writes atomically (temporary file + rename). IoError naming the path.
Status WriteGolden(const std::string& path, const Golden& golden);
// Reads and validates (ParseGoldenLayout, golden_format.h): Corrupt naming the path and the problem for a
// truncated file, a header that is not JSON, a missing tensor, a format other than framegate-golden, shapes
// or offsets that do not fit the file; Unsupported for a newer format_version; NotFound when the file does
// not exist.
StatusOr<Golden> ReadGolden(const std::string& path);
// The same checks on a golden file's bytes; `path` only names it in errors. Never throws.
StatusOr<Golden> ParseGolden(const std::string& path, const std::string& bytes);

// Ok when the golden at `path` has the shapes of what a cell made, frames [T, H, W, 3] and
// latents [1, C, T, h, w]; else Corrupt "<path>: golden latents [...] but the cell made
// [...]" (a damaged golden, or one of another config). Check it before comparing: the
// comparison reads both tensors as the cell's shape.
Status CheckGoldenShapes(const std::string& path, const Golden& golden, const at::Tensor& frames,
                         const at::Tensor& latents);

}  // namespace framegate
