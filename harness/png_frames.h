// Frames as PNG files (8-bit RGB), written and read with libpng.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/status.h"

namespace framegate {

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // [H, W, 3], row-major
};

// The most pixels ReadPngRgb decodes from one PNG (16384 x 16384).
constexpr uint64_t kMaxPngPixels = uint64_t{1} << 28;

Status WritePngRgb(const std::string& path, const RgbImage& image);
// Reads an 8-bit or 16-bit RGB/RGBA/gray PNG as 8-bit RGB. Only a regular file is opened
// (OpenRegularFile: a FIFO is refused, never waited on); a header that declares more than
// kMaxPngPixels pixels, or more than the file's size can hold, is refused before anything
// is allocated.
StatusOr<RgbImage> ReadPngRgb(const std::string& path);

// Converts a frame [H, W, 3] in [0, 1] (float32) to 8-bit: round(clamp(v, 0, 1) * 255);
// NaN maps to 0.
RgbImage FrameToRgb(const float* frame, int64_t height, int64_t width);

// Writes frames [T, H, W, 3] (float32, [0, 1]) as <dir>/frame_0000.png ... Returns the paths.
StatusOr<std::vector<std::string>> WriteFramePngs(const std::string& dir, const float* frames, int64_t count,
                                                  int64_t height, int64_t width);

}  // namespace framegate
