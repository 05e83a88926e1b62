#include "golden/golden_format.h"

#include <algorithm>

#include <cstring>
#include <fstream>
#include <iterator>

namespace framegate {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 1 << 20;

// obj[key] when it is a string, else "" (json::value throws on a non-string value).
std::string StringField(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The tensor `name` from the header, checked against the data section's size.
StatusOr<GoldenTensorBytes> FindTensor(const std::string& path, const json& header, const std::string& name,
                                       const char* data, uint64_t data_size, size_t rank) {
  const auto fail = [&](const std::string& what) {
    return Status::Corrupt(path + ": tensor '" + name + "': " + what);
  };
  if (!header.contains(name)) return Status::Corrupt(path + ": no tensor '" + name + "'");
  const json& entry = header.at(name);
  if (!entry.is_object() || StringField(entry, "dtype") != "F32") return fail("dtype is not F32");
  if (!entry.contains("shape") || !entry["shape"].is_array() || entry["shape"].size() != rank) {
    return fail("shape must have " + std::to_string(rank) + " dimensions");
  }
  GoldenTensorBytes tensor;
  uint64_t elements = 1;
  for (const json& d : entry["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) return fail("bad dimension");
    tensor.shape.push_back(d.get<int64_t>());
    if (tensor.shape.back() > 0 &&
        elements > (uint64_t{1} << 40) / static_cast<uint64_t>(tensor.shape.back())) {
      return fail("shape too large");
    }
    elements *= static_cast<uint64_t>(tensor.shape.back());
  }
  const json& offsets = entry.value("data_offsets", json());
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return fail("data_offsets must be two unsigned integers");
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (end < begin || end - begin != elements * 4) return fail("data_offsets do not match shape");
  if (end > data_size) {
    return fail("data ends at byte " + std::to_string(end) + " but the file has " +
                std::to_string(data_size) + " data bytes (truncated?)");
  }
  tensor.data = data + begin;
  tensor.size = end - begin;
  return tensor;
}

}  // namespace

StatusOr<GoldenLayout> ParseGoldenLayout(const std::string& path, const std::string& bytes) {
  if (bytes.size() < 8)
    return Status::Corrupt(path + ": truncated (" + std::to_string(bytes.size()) + " bytes, no header)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    return Status::Corrupt(path + ": header length " + std::to_string(n) +
                           " does not fit the file (not a golden, or truncated)");
  }
  const json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n), nullptr,
                                  /*allow_exceptions=*/false);
  if (!header.is_object()) return Status::Corrupt(path + ": header is not a JSON object");
  const json meta = header.value("__metadata__", json::object());
  if (!meta.is_object() || StringField(meta, "format") != kGoldenFormat) {
    return Status::Corrupt(path + ": not a framegate golden (metadata format is not '" +
                           std::string(kGoldenFormat) + "')");
  }
  int version = 0;
  try {
    version = std::stoi(StringField(meta, "format_version"));
  } catch (const std::exception&) {
  }
  if (version < 1) return Status::Corrupt(path + ": bad format_version");
  if (version > kGoldenFormatVersion) {
    return Status::Unsupported(path + ": golden format version " + std::to_string(version) +
                               " is newer than this framegate reads (" +
                               std::to_string(kGoldenFormatVersion) + ")");
  }
  const char* data = bytes.data() + 8 + n;
  const uint64_t data_size = bytes.size() - 8 - n;
  GoldenLayout layout;
  StatusOr<GoldenTensorBytes> frames = FindTensor(path, header, "frames", data, data_size, 4);
  if (!frames.ok()) return frames.status();
  StatusOr<GoldenTensorBytes> latents = FindTensor(path, header, "latents", data, data_size, 5);
  if (!latents.ok()) return latents.status();
  if (frames->shape[3] != 3) return Status::Corrupt(path + ": frames must be [T, H, W, 3]");
  if (latents->shape[0] != 1) return Status::Corrupt(path + ": latents must be [1, C, T, h, w]");
  if (version >= 2) {
    StatusOr<GoldenTensorBytes> trajectory = FindTensor(path, header, "trajectory", data, data_size, 6);
    if (!trajectory.ok()) return trajectory.status();
    if (trajectory->shape[0] < 1 ||
        !std::equal(latents->shape.begin(), latents->shape.end(), trajectory->shape.begin() + 1)) {
      return Status::Corrupt(path + ": trajectory must be [S + 1, 1, C, T, h, w] with the latents' shape");
    }
    layout.trajectory = std::move(*trajectory);
  }
  layout.frames = std::move(*frames);
  layout.latents = std::move(*latents);
  layout.metadata = meta;
  return layout;
}

StatusOr<std::string> ReadGoldenBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": no such golden file");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

StatusOr<GoldenFrames> ReadGoldenFrames(const std::string& path) {
  StatusOr<std::string> bytes = ReadGoldenBytes(path);
  if (!bytes.ok()) return bytes.status();
  StatusOr<GoldenLayout> layout = ParseGoldenLayout(path, *bytes);
  if (!layout.ok()) return layout.status();
  GoldenFrames frames;
  frames.shape = layout->frames.shape;
  frames.values.resize(layout->frames.size / 4);
  if (layout->frames.size > 0) std::memcpy(frames.values.data(), layout->frames.data, layout->frames.size);
  return frames;
}

}  // namespace framegate
