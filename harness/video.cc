#include "harness/video.h"

#include <cassert>
#include <sstream>

namespace framegate {

FrameView VideoView::Frame(int64_t t) const {
  assert(t >= 0 && t < frames);
  return FrameView{data + t * height * width * channels, height, width, channels};
}

std::string VideoView::ShapeString() const {
  std::ostringstream os;
  os << "[" << frames << ", " << height << ", " << width << ", " << channels << "]";
  return os.str();
}

}  // namespace framegate
