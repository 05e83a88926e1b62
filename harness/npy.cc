#include "harness/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace framegate {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

size_t DtypeSize(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kFloat32: return 4;
    case NpyDtype::kFloat64: return 8;
    case NpyDtype::kUint8: return 1;
  }
  return 1;
}

// Extracts the value text of 'key' from the header dict, e.g. "'<f4'" or "(2, 3)": a quoted
// string, a parenthesised tuple, True or False. A plain scan, not std::regex: libstdc++'s
// regex recurses once per character and overflowed the stack on a long header (npy_fuzz).
bool FindHeaderValue(const std::string& header, const std::string& key, std::string* value) {
  const std::string quoted = "'" + key + "'";
  for (size_t at = header.find(quoted); at != std::string::npos;
       at = header.find(quoted, at + 1)) {
    size_t i = header.find_first_not_of(" \t\r\n", at + quoted.size());
    if (i == std::string::npos || header[i] != ':') continue;
    i = header.find_first_not_of(" \t\r\n", i + 1);
    if (i == std::string::npos) return false;
    size_t end = std::string::npos;
    if (header[i] == '\'') end = header.find('\'', i + 1);
    else if (header[i] == '(') end = header.find(')', i + 1);
    else if (header.compare(i, 4, "True") == 0) end = i + 3;
    else if (header.compare(i, 5, "False") == 0) end = i + 4;
    if (end == std::string::npos) continue;
    *value = header.substr(i, end - i + 1);
    return true;
  }
  return false;
}

}  // namespace

int64_t NpyArray::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> NpyArray::ToFloat32(bool scale_uint8) const {
  const int64_t n = NumElements();
  std::vector<float> out(static_cast<size_t>(n));
  switch (dtype) {
    case NpyDtype::kFloat32:
      if (n > 0) std::memcpy(out.data(), bytes.data(), n * sizeof(float));  // no null pointers
      break;
    case NpyDtype::kFloat64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, bytes.data() + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    case NpyDtype::kUint8:
      for (int64_t i = 0; i < n; ++i) out[i] = scale_uint8 ? bytes[i] / 255.0f : bytes[i];
      break;
  }
  return out;
}

StatusOr<NpyArray> ParseNpy(const std::string& name, const uint8_t* data, size_t size) {
  auto bad = [&](const std::string& what) { return Status::Corrupt(name + ": " + what); };
  if (size < kMagicSize + 4 || std::memcmp(data, kMagic, kMagicSize) != 0)
    return bad("not a .npy file (bad magic)");
  const uint8_t major = data[6];
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = data[8] | (data[9] << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return bad("truncated header");
    header_len = static_cast<size_t>(data[8]) | (static_cast<size_t>(data[9]) << 8) |
                 (static_cast<size_t>(data[10]) << 16) | (static_cast<size_t>(data[11]) << 24);
    offset = 12;
  } else {
    return bad("unsupported .npy format version " + std::to_string(major));
  }
  if (header_len > size - offset) return bad("truncated header");
  const std::string header(reinterpret_cast<const char*>(data + offset), header_len);
  const size_t data_offset = offset + header_len;

  NpyArray array;
  std::string descr, fortran, shape_text;
  if (!FindHeaderValue(header, "descr", &descr)) return bad("header: no 'descr'");
  if (descr == "'<f4'") array.dtype = NpyDtype::kFloat32;
  else if (descr == "'<f8'") array.dtype = NpyDtype::kFloat64;
  else if (descr == "'|u1'" || descr == "'<u1'") array.dtype = NpyDtype::kUint8;
  else return bad("header: unsupported dtype " + (descr.size() > 40 ? descr.substr(0, 40) + "..." : descr) +
                  " (expected '<f4', '<f8' or '|u1')");
  if (!FindHeaderValue(header, "fortran_order", &fortran)) return bad("header: no 'fortran_order'");
  if (fortran != "False") return bad("header: Fortran-order arrays are not supported");
  if (!FindHeaderValue(header, "shape", &shape_text)) return bad("header: no 'shape'");

  std::string dims = shape_text.substr(1, shape_text.size() - 2);
  std::stringstream ss(dims);
  std::string item;
  int64_t count = 1;
  while (std::getline(ss, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    const auto last = item.find_last_not_of(" \t");
    const std::string digits = item.substr(first, last - first + 1);
    if (digits.empty() || digits.size() > 12 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return bad("header: bad shape " + shape_text);
    const int64_t d = std::stoll(digits);
    array.shape.push_back(d);
    if (d != 0 && count > (int64_t{1} << 40) / d) return bad("header: shape too large " + shape_text);
    count *= d;
  }
  const size_t expected = static_cast<size_t>(count) * DtypeSize(array.dtype);
  if (size - data_offset != expected) {
    return bad("data is " + std::to_string(size - data_offset) + " bytes, shape " + shape_text +
               " needs " + std::to_string(expected));
  }
  array.bytes.assign(data + data_offset, data + size);
  return array;
}

StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseNpy(path, bytes.data(), bytes.size());
}

Status WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape,
                       const float* values) {
  std::string shape_text = "(";
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    if (i + 1 < shape.size()) shape_text += " ";
    count *= shape[i];
  }
  shape_text += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Pad so that magic(6) + version(2) + len(2) + header + '\n' is a multiple of 64.
  const size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::IoError(path + ": cannot open for writing");
  out.write(kMagic, kMagicSize);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), header.size());
  out.write(reinterpret_cast<const char*>(values), count * sizeof(float));
  if (!out) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace framegate
