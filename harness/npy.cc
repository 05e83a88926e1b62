#include "harness/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "harness/regular_file.h"

namespace framegate {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// NumPy writes headers of a few hundred bytes (and reads at most 10,000 by default).
constexpr size_t kMaxHeaderBytes = 1 << 20;

size_t DtypeSize(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::kFloat32:
      return 4;
    case NpyDtype::kFloat64:
      return 8;
    case NpyDtype::kUint8:
      return 1;
  }
  return 1;
}

// Extracts the value text of 'key' from the header dict, e.g. "'<f4'" or "(2, 3)": a quoted
// string, a parenthesised tuple, True or False. A plain scan, not std::regex: libstdc++'s
// regex recurses once per character and overflowed the stack on a long header (npy_fuzz).
bool FindHeaderValue(const std::string& header, const std::string& key, std::string* value) {
  const std::string quoted = "'" + key + "'";
  for (size_t at = header.find(quoted); at != std::string::npos; at = header.find(quoted, at + 1)) {
    size_t i = header.find_first_not_of(" \t\r\n", at + quoted.size());
    if (i == std::string::npos || header[i] != ':') continue;
    i = header.find_first_not_of(" \t\r\n", i + 1);
    if (i == std::string::npos) return false;
    size_t end = std::string::npos;
    if (header[i] == '\'')
      end = header.find('\'', i + 1);
    else if (header[i] == '(')
      end = header.find(')', i + 1);
    else if (header.compare(i, 4, "True") == 0)
      end = i + 3;
    else if (header.compare(i, 5, "False") == 0)
      end = i + 4;
    if (end == std::string::npos) continue;
    *value = header.substr(i, end - i + 1);
    return true;
  }
  return false;
}

// The first key of the header dict that appears twice ("" when none): NumPy's
// literal_eval keeps the last value of a duplicated key, FindHeaderValue the first, so a
// header with one is refused rather than read differently. Keys are the quoted strings
// at the dict's top level that a ':' follows.
std::string DuplicatedHeaderKey(const std::string& header) {
  std::vector<std::string> keys;
  int depth = 0;  // brackets open, the dict's own included
  for (size_t i = 0; i < header.size(); ++i) {
    const char c = header[i];
    if (c == '{' || c == '(' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ')' || c == ']') {
      --depth;
    } else if (c == '\'' || c == '"') {
      const size_t end = header.find(c, i + 1);
      if (end == std::string::npos) return "";
      const size_t next = header.find_first_not_of(" \t\r\n", end + 1);
      if (depth == 1 && next != std::string::npos && header[next] == ':') {
        std::string key = header.substr(i + 1, end - i - 1);
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) return key;
        keys.push_back(std::move(key));
      }
      i = end;
    }
  }
  return "";
}

}  // namespace

int64_t NpyArray::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// The header of a .npy file of `size` bytes at `data`: dtype, shape and where the data
// starts; checks that the data is exactly as long as the shape needs.
struct NpyHeader {
  NpyDtype dtype = NpyDtype::kFloat32;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

StatusOr<NpyHeader> ParseNpyHeader(const std::string& name, const uint8_t* data, size_t size) {
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
  if (header_len > kMaxHeaderBytes) {
    return bad("header is " + std::to_string(header_len) + " bytes, more than " +
               std::to_string(kMaxHeaderBytes));
  }
  if (header_len > size - offset) return bad("truncated header");
  const std::string header(reinterpret_cast<const char*>(data + offset), header_len);
  const std::string duplicated = DuplicatedHeaderKey(header);
  if (!duplicated.empty()) {
    return bad("header: key '" + (duplicated.size() > 40 ? duplicated.substr(0, 40) + "..." : duplicated) +
               "' appears twice");
  }

  NpyHeader array;
  array.data_offset = offset + header_len;
  std::string descr, fortran, shape_text;
  if (!FindHeaderValue(header, "descr", &descr)) return bad("header: no 'descr'");
  if (descr == "'<f4'")
    array.dtype = NpyDtype::kFloat32;
  else if (descr == "'<f8'")
    array.dtype = NpyDtype::kFloat64;
  else if (descr == "'|u1'" || descr == "'<u1'")
    array.dtype = NpyDtype::kUint8;
  else
    return bad("header: unsupported dtype " + (descr.size() > 40 ? descr.substr(0, 40) + "..." : descr) +
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
    if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string::npos)
      return bad("header: bad shape " + shape_text);
    const int64_t d = std::stoll(digits);
    array.shape.push_back(d);
    if (d != 0 && count > (int64_t{1} << 40) / d) return bad("header: shape too large " + shape_text);
    count *= d;
  }
  const size_t expected = static_cast<size_t>(count) * DtypeSize(array.dtype);
  if (size - array.data_offset != expected) {
    return bad("data is " + std::to_string(size - array.data_offset) + " bytes, shape " + shape_text +
               " needs " + std::to_string(expected));
  }
  return array;
}

// Values [0, n) of raw little-endian `bytes` of `dtype` as float32 into out.
void ConvertToFloat32(NpyDtype dtype, const uint8_t* bytes, int64_t n, bool scale_uint8, float* out) {
  switch (dtype) {
    case NpyDtype::kFloat32:
      if (n > 0) std::memcpy(out, bytes, n * sizeof(float));  // no null pointers
      break;
    case NpyDtype::kFloat64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, bytes + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    case NpyDtype::kUint8:
      for (int64_t i = 0; i < n; ++i) out[i] = scale_uint8 ? bytes[i] / 255.0f : bytes[i];
      break;
  }
}

// The file's bytes into *out: no more than the size fstat gave (a file that grows while
// it is read is cut there; one that shrinks is read to its end).
Status ReadAll(const std::string& path, const RegularFile& file, std::vector<uint8_t>* out) {
  try {
    out->resize(file.size);
  } catch (const std::bad_alloc&) {
    return Status::IoError(path + ": " + std::to_string(file.size) + " bytes do not fit in memory");
  }
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t got = ::read(file.fd, out->data() + done, out->size() - done);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::IoError(path + ": read failed: " + std::strerror(errno));
    }
    done += static_cast<size_t>(got);
  }
  out->resize(done);
  return Status::Ok();
}

}  // namespace

std::vector<float> NpyArray::ToFloat32(bool scale_uint8) const {
  std::vector<float> out(static_cast<size_t>(NumElements()));
  ConvertToFloat32(dtype, bytes.data(), NumElements(), scale_uint8, out.data());
  return out;
}

StatusOr<NpyArray> ParseNpy(const std::string& name, const uint8_t* data, size_t size) {
  StatusOr<NpyHeader> header = ParseNpyHeader(name, data, size);
  if (!header.ok()) return header.status();
  NpyArray array;
  array.dtype = header->dtype;
  array.shape = std::move(header->shape);
  array.bytes.assign(data + header->data_offset, data + size);
  return array;
}

StatusOr<NpyArray> ReadNpy(const std::string& path) {
  StatusOr<RegularFile> file = OpenRegularFile(path);
  if (!file.ok()) return file.status();
  std::vector<uint8_t> bytes;
  const Status read = ReadAll(path, *file, &bytes);
  ::close(file->fd);
  FG_RETURN_IF_ERROR(read);
  return ParseNpy(path, bytes.data(), bytes.size());
}

NpyFile::NpyFile(NpyFile&& other) noexcept { *this = std::move(other); }

NpyFile& NpyFile::operator=(NpyFile&& other) noexcept {
  if (this == &other) return *this;
  Unmap();
  dtype_ = other.dtype_;
  shape_ = std::move(other.shape_);
  data_ = other.data_;
  map_ = other.map_;
  map_size_ = other.map_size_;
  bytes_ = std::move(other.bytes_);  // keeps its buffer: data_ stays valid
  other.data_ = nullptr;
  other.map_ = nullptr;
  other.map_size_ = 0;
  return *this;
}

NpyFile::~NpyFile() { Unmap(); }

void NpyFile::Unmap() {
  if (map_ != nullptr) munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

int64_t NpyFile::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

const float* NpyFile::Float32InPlace() const {
  if (dtype_ != NpyDtype::kFloat32 || reinterpret_cast<uintptr_t>(data_) % alignof(float) != 0) {
    return nullptr;
  }
  return reinterpret_cast<const float*>(data_);
}

void NpyFile::CopyToFloat32(float* out, bool scale_uint8) const {
  ConvertToFloat32(dtype_, data_, NumElements(), scale_uint8, out);
}

StatusOr<NpyFile> OpenNpy(const std::string& path) {
  StatusOr<RegularFile> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  NpyFile file;
  if (opened->size > 0) {
    // MAP_POPULATE: the page tables are filled in one go rather than a fault per page.
    void* map = ::mmap(nullptr, opened->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, opened->fd, 0);
    if (map != MAP_FAILED) {
      file.map_ = map;
      file.map_size_ = opened->size;
    }
  }
  // Not mappable (an empty file, a failed mmap): read it, once.
  const Status read = file.map_ == nullptr ? ReadAll(path, *opened, &file.bytes_) : Status::Ok();
  ::close(opened->fd);
  FG_RETURN_IF_ERROR(read);
  const uint8_t* bytes = file.map_ != nullptr ? static_cast<const uint8_t*>(file.map_) : file.bytes_.data();
  const size_t size = file.map_ != nullptr ? file.map_size_ : file.bytes_.size();
  StatusOr<NpyHeader> header = ParseNpyHeader(path, bytes, size);
  if (!header.ok()) return header.status();
  file.dtype_ = header->dtype;
  file.shape_ = std::move(header->shape);
  file.data_ = bytes + header->data_offset;
  return file;
}

Status WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape, const float* values) {
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
