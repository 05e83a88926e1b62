#include "harness/png_frames.h"

#include <png.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "harness/regular_file.h"

namespace framegate {
namespace {

struct FileCloser {
  void operator()(FILE* f) const {
    if (f) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

// Deflate compresses at most about 1032:1: a PNG whose declared pixels need more bytes
// than that times its size cannot hold them (a damaged or hostile header).
constexpr uint64_t kMaxDeflateRatio = 1032;

// Ok when a width x height RGB image may be decoded from a PNG file of `file_size` bytes:
// at most kMaxPngPixels pixels, and no more bytes than deflate can expand the file into.
Status CheckDeclaredSize(const std::string& path, uint64_t width, uint64_t height, uint64_t file_size) {
  const uint64_t pixels = width * height;  // each below 2^31 (libpng checks): no overflow
  const std::string declared = std::to_string(width) + "x" + std::to_string(height);
  if (pixels > kMaxPngPixels) {
    return Status::InvalidInput(path + ": PNG header declares " + declared + " pixels, more than " +
                                std::to_string(kMaxPngPixels));
  }
  if (pixels * 3 > file_size * kMaxDeflateRatio + 4096) {
    return Status::Corrupt(path + ": PNG header declares " + declared + " pixels, more than its " +
                           std::to_string(file_size) + " bytes can hold");
  }
  return Status::Ok();
}

}  // namespace

Status WritePngRgb(const std::string& path, const RgbImage& image) {
  File file(std::fopen(path.c_str(), "wb"));
  if (!file) return Status::IoError(path + ": cannot open for writing");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    return Status::Internal("libpng: cannot create write struct");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return Status::IoError(path + ": PNG write failed");
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, image.width, image.height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < image.height; ++y) {
    png_write_row(png, const_cast<png_bytep>(image.pixels.data() + y * image.width * 3));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return Status::Ok();
}

StatusOr<RgbImage> ReadPngRgb(const std::string& path) {
  StatusOr<RegularFile> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  File file(::fdopen(opened->fd, "rb"));
  if (!file) {
    ::close(opened->fd);
    return Status::IoError(path + ": cannot open");
  }
  unsigned char signature[8] = {};
  if (std::fread(signature, 1, 8, file.get()) != 8 || png_sig_cmp(signature, 0, 8) != 0) {
    return Status::Corrupt(path + ": not a PNG file (bad signature)");
  }
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Status::Internal("libpng: cannot create read struct");
  }
  RgbImage image;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Status::Corrupt(path + ": damaged PNG data");
  }
  png_init_io(png, file.get());
  png_set_sig_bytes(png, 8);
  png_read_info(png, info);
  {  // a scope of its own: a later longjmp must not skip a destructor
    Status size_ok = CheckDeclaredSize(path, png_get_image_width(png, info), png_get_image_height(png, info),
                                       opened->size);
    if (!size_ok.ok()) {
      png_destroy_read_struct(&png, &info, nullptr);
      return size_ok;
    }
  }
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_palette_to_rgb(png);
  png_set_expand_gray_1_2_4_to_8(png);
  png_set_gray_to_rgb(png);
  png_read_update_info(png, info);
  image.width = png_get_image_width(png, info);
  image.height = png_get_image_height(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(image.width * 3)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Status::Corrupt(path + ": unsupported PNG pixel layout");
  }
  image.pixels.resize(image.width * image.height * 3);
  rows.resize(image.height);
  for (int64_t y = 0; y < image.height; ++y) rows[y] = image.pixels.data() + y * image.width * 3;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return image;
}

RgbImage FrameToRgb(const float* frame, int64_t height, int64_t width) {
  RgbImage image{width, height, std::vector<uint8_t>(width * height * 3)};
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const float v = frame[i];
    image.pixels[i] =
        std::isnan(v) ? 0 : static_cast<uint8_t>(std::lround(std::fmin(std::fmax(v, 0.f), 1.f) * 255.f));
  }
  return image;
}

StatusOr<std::vector<std::string>> WriteFramePngs(const std::string& dir, const float* frames, int64_t count,
                                                  int64_t height, int64_t width) {
  std::vector<std::string> paths;
  for (int64_t t = 0; t < count; ++t) {
    char name[32];
    std::snprintf(name, sizeof(name), "/frame_%04lld.png", static_cast<long long>(t));
    paths.push_back(dir + name);
    FG_RETURN_IF_ERROR(WritePngRgb(paths.back(), FrameToRgb(frames + t * height * width * 3, height, width)));
  }
  return paths;
}

}  // namespace framegate
