#include "reports/frame_images.h"

#include <algorithm>
#include <cmath>

namespace framegate {
namespace {

// Inferno-like ramp: black, purple, red, orange, pale yellow.
constexpr uint8_t kStops[5][3] = {{0, 0, 4}, {87, 16, 110}, {188, 55, 84}, {249, 142, 9}, {252, 255, 164}};

}  // namespace

std::string Video::ShapeString() const {
  return "[" + std::to_string(frames) + ", " + std::to_string(height) + ", " + std::to_string(width) + ", 3]";
}

namespace {

Status CheckFramesShape(const std::string& name, const std::vector<int64_t>& s) {
  if (s.size() == 4 && s[3] == 3 && s[0] >= 1 && s[1] >= 1 && s[2] >= 1) return Status::Ok();
  std::string shape = "[";
  for (size_t i = 0; i < s.size(); ++i) shape += (i ? ", " : "") + std::to_string(s[i]);
  return Status::InvalidInput(name + ": frames must be [T, H, W, 3], got " + shape + "]");
}

}  // namespace

StatusOr<Video> VideoFromFloat32(const std::string& name, const std::vector<int64_t>& shape,
                                 const float* data) {
  FG_RETURN_IF_ERROR(CheckFramesShape(name, shape));
  Video video;
  video.frames = shape[0];
  video.height = shape[1];
  video.width = shape[2];
  video.rgb.assign(data, data + shape[0] * shape[1] * shape[2] * 3);
  return video;
}

StatusOr<Video> ReadVideoNpy(const std::string& path) {
  StatusOr<NpyFile> file = OpenNpy(path);  // mapped, converted once into the Video
  if (!file.ok()) return file.status();
  FG_RETURN_IF_ERROR(CheckFramesShape(path, file->shape()));
  Video video;
  video.frames = file->shape()[0];
  video.height = file->shape()[1];
  video.width = file->shape()[2];
  video.rgb.resize(static_cast<size_t>(file->NumElements()));
  file->CopyToFloat32(video.rgb.data());
  return video;
}

double MaxFiniteAbsDiff(const Video& golden, const Video& candidate, int64_t frames) {
  const int64_t n = frames * golden.height * golden.width * 3;
  double max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(candidate.rgb[i]) - golden.rgb[i]);
    if (std::isfinite(d)) max_diff = std::max(max_diff, d);
  }
  return max_diff;
}

void HeatColour(double x, uint8_t rgb[3]) {
  x = std::clamp(x, 0.0, 1.0) * 4.0;
  const int low = std::min(3, static_cast<int>(x));
  const double f = x - low;
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<uint8_t>(std::lround(kStops[low][c] + f * (kStops[low + 1][c] - kStops[low][c])));
  }
}

RgbImage DiffHeatMap(const Video& golden, const Video& candidate, int64_t t, double scale) {
  if (!(scale > 0)) scale = 1.0 / 255.0;
  RgbImage image;
  image.height = golden.height;
  image.width = golden.width;
  image.pixels.resize(static_cast<size_t>(image.height * image.width * 3));
  const float* g = golden.Frame(t);
  const float* c = candidate.Frame(t);
  for (int64_t p = 0; p < image.height * image.width; ++p) {
    double diff = 0;
    bool finite = true;
    for (int k = 0; k < 3; ++k) {
      const double d = std::fabs(static_cast<double>(c[p * 3 + k]) - g[p * 3 + k]);
      if (!std::isfinite(d))
        finite = false;
      else
        diff = std::max(diff, d);
    }
    uint8_t* out = &image.pixels[static_cast<size_t>(p * 3)];
    if (!finite) {
      out[0] = 0, out[1] = 255, out[2] = 255;
    } else {
      HeatColour(diff / scale, out);
    }
  }
  return image;
}

}  // namespace framegate
