// NumPy .npy files (format 1.0/2.0/3.0), the interchange format of framegate's frames:
// float32 [T, H, W, 3] in [0, 1] (or uint8 [T, H, W, 3]). Only little-endian float32,
// float64 and uint8 in C order are read; anything else is a Status naming the problem.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/status.h"

namespace framegate {

enum class NpyDtype { kFloat32, kFloat64, kUint8 };

struct NpyArray {
  NpyDtype dtype = NpyDtype::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // raw little-endian C-order data

  int64_t NumElements() const;
  // Values as float32 (float64 narrowed; uint8 scaled to [0, 1] when scale_uint8).
  std::vector<float> ToFloat32(bool scale_uint8 = true) const;
};

// Parses .npy bytes; `name` is used in error messages ("<name>: header: ..."). Corrupt
// for a header over 1 MiB, a key the header dict holds twice (NumPy would keep the last
// value), or data that is not exactly as long as the shape needs.
StatusOr<NpyArray> ParseNpy(const std::string& name, const uint8_t* data, size_t size);
// Reads a regular file (OpenRegularFile, regular_file.h: a FIFO or a device is refused
// without blocking) and parses it as ParseNpy does.
StatusOr<NpyArray> ReadNpy(const std::string& path);

// A .npy file read once: mapped read-only where it can be (else read into memory), the
// header parsed and checked as ParseNpy does, the data left where it is, not copied.
// Move-only; data() stays valid while the NpyFile lives.
class NpyFile {
 public:
  NpyFile(NpyFile&& other) noexcept;
  NpyFile& operator=(NpyFile&& other) noexcept;
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;
  ~NpyFile();

  NpyDtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t NumElements() const;
  const uint8_t* data() const { return data_; }  // raw little-endian C-order values
  // The values themselves when they are float32 at a float-aligned address (NumPy pads
  // its headers to 64 bytes), else null: a caller then copies with CopyToFloat32.
  const float* Float32InPlace() const;
  // The values as float32 into out[0, NumElements()), as NpyArray::ToFloat32 converts.
  void CopyToFloat32(float* out, bool scale_uint8 = true) const;

 private:
  friend StatusOr<NpyFile> OpenNpy(const std::string& path);
  NpyFile() = default;
  void Unmap();

  NpyDtype dtype_ = NpyDtype::kFloat32;
  std::vector<int64_t> shape_;
  const uint8_t* data_ = nullptr;
  void* map_ = nullptr;  // the mapping, when mapped
  size_t map_size_ = 0;
  std::vector<uint8_t> bytes_;  // the file, when it could not be mapped
};

// Opens a .npy file: OpenRegularFile's errors (NotFound "<path>: cannot open", InvalidInput
// "<path>: not a regular file (a FIFO)": never blocks), or ParseNpy's errors.
StatusOr<NpyFile> OpenNpy(const std::string& path);

// Writes a float32 array (version 1.0 header). Returns IoError naming the path on failure.
Status WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape, const float* values);

}  // namespace framegate
