#include "golden/golden_file.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace framegate {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "framegate-golden";
constexpr uint64_t kMaxHeaderBytes = 1 << 20;

// obj[key] when it is a string, else "" (json::value throws on a non-string value).
std::string StringField(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json TensorEntry(const at::Tensor& t, uint64_t begin) {
  return {{"dtype", "F32"},
          {"shape", t.sizes().vec()},
          {"data_offsets", {begin, begin + static_cast<uint64_t>(t.numel()) * 4}}};
}

// The tensor `name` from the header, checked against the data section's size.
StatusOr<at::Tensor> ReadTensor(const std::string& path, const json& header,
                                const std::string& name, const char* data, uint64_t data_size,
                                size_t rank) {
  const auto fail = [&](const std::string& what) {
    return Status::Corrupt(path + ": tensor '" + name + "': " + what);
  };
  if (!header.contains(name)) return Status::Corrupt(path + ": no tensor '" + name + "'");
  const json& entry = header.at(name);
  if (!entry.is_object() || StringField(entry, "dtype") != "F32") return fail("dtype is not F32");
  if (!entry.contains("shape") || !entry["shape"].is_array() || entry["shape"].size() != rank) {
    return fail("shape must have " + std::to_string(rank) + " dimensions");
  }
  std::vector<int64_t> shape;
  uint64_t elements = 1;
  for (const json& d : entry["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) return fail("bad dimension");
    shape.push_back(d.get<int64_t>());
    if (shape.back() > 0 && elements > (uint64_t{1} << 40) / static_cast<uint64_t>(shape.back())) {
      return fail("shape too large");
    }
    elements *= static_cast<uint64_t>(shape.back());
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
  at::Tensor t = at::empty(shape, at::kFloat);
  if (end > begin) std::memcpy(t.data_ptr<float>(), data + begin, end - begin);
  return t;
}

}  // namespace

json ProvenanceToJson(const GoldenProvenance& p) {
  return {{"config", p.config},
          {"config_hash", p.config_hash},
          {"framegate_version", p.framegate_version},
          {"libtorch_version", p.libtorch_version},
          {"blas", p.blas},
          {"device", p.device},
          {"command", p.command},
          {"created_at", p.created_at}};
}

GoldenProvenance ProvenanceFromJson(const json& j) {
  GoldenProvenance p;
  p.config = StringField(j, "config");
  p.config_hash = StringField(j, "config_hash");
  p.framegate_version = StringField(j, "framegate_version");
  p.libtorch_version = StringField(j, "libtorch_version");
  p.blas = StringField(j, "blas");
  p.device = StringField(j, "device");
  p.command = StringField(j, "command");
  p.created_at = StringField(j, "created_at");
  return p;
}

Status WriteGolden(const std::string& path, const Golden& golden) {
  const at::Tensor frames = golden.frames.to(at::kCPU, at::kFloat).contiguous();
  const at::Tensor latents = golden.latents.to(at::kCPU, at::kFloat).contiguous();
  const GoldenProvenance& p = golden.provenance;
  json header;
  header["__metadata__"] = ProvenanceToJson(p);
  header["__metadata__"]["format"] = kFormat;
  header["__metadata__"]["format_version"] = std::to_string(kGoldenFormatVersion);
  const uint64_t frames_bytes = static_cast<uint64_t>(frames.numel()) * 4;
  header["frames"] = TensorEntry(frames, 0);
  header["latents"] = TensorEntry(latents, frames_bytes);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // safetensors pads the header to 8 bytes
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IoError(tmp + ": cannot open for writing");
    uint64_t n = text.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(le), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.write(reinterpret_cast<const char*>(frames.data_ptr<float>()),
              static_cast<std::streamsize>(frames_bytes));
    out.write(reinterpret_cast<const char*>(latents.data_ptr<float>()),
              static_cast<std::streamsize>(latents.numel() * 4));
    if (!out.flush()) return Status::IoError(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError(path + ": cannot rename the temporary file into place");
  }
  return Status::Ok();
}

StatusOr<Golden> ReadGolden(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": no such golden file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseGolden(path, bytes);
}

StatusOr<Golden> ParseGolden(const std::string& path, const std::string& bytes) {
  if (bytes.size() < 8) return Status::Corrupt(path + ": truncated (" + std::to_string(bytes.size()) + " bytes, no header)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    return Status::Corrupt(path + ": header length " + std::to_string(n) +
                           " does not fit the file (not a golden, or truncated)");
  }
  const json header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n),
                                  nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return Status::Corrupt(path + ": header is not a JSON object");
  const json meta = header.value("__metadata__", json::object());
  if (!meta.is_object() || StringField(meta, "format") != kFormat) {
    return Status::Corrupt(path + ": not a framegate golden (metadata format is not '" +
                           std::string(kFormat) + "')");
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
  Golden golden;
  StatusOr<at::Tensor> frames = ReadTensor(path, header, "frames", data, data_size, 4);
  if (!frames.ok()) return frames.status();
  StatusOr<at::Tensor> latents = ReadTensor(path, header, "latents", data, data_size, 5);
  if (!latents.ok()) return latents.status();
  if (frames->size(3) != 3) return Status::Corrupt(path + ": frames must be [T, H, W, 3]");
  golden.frames = *frames;
  golden.latents = *latents;
  golden.provenance = ProvenanceFromJson(meta);
  return golden;
}

}  // namespace framegate
