// The pictures of the HTML report: golden and candidate frames and their absolute
// difference as a heat map, as 8-bit PNG files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/npy.h"
#include "harness/png_frames.h"
#include "harness/status.h"

namespace framegate {

// Frames float32 [frames, height, width, 3], values nominally in [0, 1], C order.
struct Video {
  int64_t frames = 0, height = 0, width = 0;
  std::vector<float> rgb;

  const float* Frame(int64_t t) const { return rgb.data() + t * height * width * 3; }
  std::string ShapeString() const;  // "[8, 64, 64, 3]"
};

// Copies float32 frames of `shape` (for the golden reader: a Golden's frames tensor, made
// contiguous, gives shape and data). InvalidInput naming `name` unless shape is
// [T, H, W, 3] with T, H, W >= 1.
StatusOr<Video> VideoFromFloat32(const std::string& name, const std::vector<int64_t>& shape,
                                 const float* data);
// A .npy video [T, H, W, 3] (float32, float64 or uint8 scaled to [0, 1]), read once
// (OpenNpy); InvalidInput naming the path for another shape, OpenNpy's errors.
StatusOr<Video> ReadVideoNpy(const std::string& path);

// Largest finite |candidate - golden| over the first `frames` frames (same shapes).
double MaxFiniteAbsDiff(const Video& golden, const Video& candidate, int64_t frames);
// Heat map of max over channels of |candidate - golden| for frame t: 0 is black, `scale`
// and above the bright end of an inferno-like ramp; a pixel where either value is NaN or
// infinite is cyan (0, 255, 255). scale <= 0 is treated as 1/255.
RgbImage DiffHeatMap(const Video& golden, const Video& candidate, int64_t t, double scale);
// The ramp's colour at position x in [0, 1] (for the legend).
void HeatColour(double x, uint8_t rgb[3]);

}  // namespace framegate
