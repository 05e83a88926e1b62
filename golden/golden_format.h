// The golden file's layout (golden_file.h describes the format), parsed without LibTorch:
// the one parser of a golden's header, used by golden_file.cc (which makes tensors of it)
// and by the commands that only show a golden's frames (the HTML report of `report`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace framegate {

constexpr const char* kGoldenFormat = "framegate-golden";
// Version 2 adds "trajectory"; version 1 goldens (frames and latents only) still judge
// frames, not step replay.
constexpr int kGoldenFormatVersion = 2;

// One F32 tensor of a golden: its shape and its little-endian bytes inside the file.
struct GoldenTensorBytes {
  std::vector<int64_t> shape;
  const char* data = nullptr;  // points into the bytes given to ParseGoldenLayout
  uint64_t size = 0;           // bytes: 4 x the product of shape
};

// A golden's header, checked against the file's size.
struct GoldenLayout {
  GoldenTensorBytes frames;   // [T, H, W, 3]
  GoldenTensorBytes latents;  // [1, C, T, h, w]
  // [S + 1, 1, C, T, h, w]: the latents before step 0 and after each step (version >= 2;
  // `data` is null in a version 1 golden).
  GoldenTensorBytes trajectory;
  nlohmann::json metadata;  // "__metadata__": an object of strings
};

// Checks a golden file's bytes: Corrupt naming the path and the problem for a truncated
// file, a header that is not JSON, a missing tensor, a format other than
// framegate-golden, shapes or offsets that do not fit the file; Unsupported for a newer
// format_version. The views point into `bytes`. Never throws.
StatusOr<GoldenLayout> ParseGoldenLayout(const std::string& path, const std::string& bytes);

// The frames of the golden file at `path` (float32 [T, H, W, 3], C order), the checks of
// ParseGoldenLayout included; NotFound when the file does not exist.
struct GoldenFrames {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
StatusOr<GoldenFrames> ReadGoldenFrames(const std::string& path);

// A golden file's bytes; NotFound naming the path when it cannot be opened.
StatusOr<std::string> ReadGoldenBytes(const std::string& path);

}  // namespace framegate
