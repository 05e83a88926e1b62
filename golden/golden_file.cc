#include "golden/golden_file.h"

#include <unistd.h>

#include <ATen/ATen.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

namespace framegate {
namespace {

using nlohmann::json;

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

// A tensor of the layout as an owned CPU float32 tensor.
at::Tensor ToTensor(const GoldenTensorBytes& bytes) {
  at::Tensor t = at::empty(bytes.shape, at::kFloat);
  if (bytes.size > 0) std::memcpy(t.data_ptr<float>(), bytes.data, bytes.size);
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
  const at::Tensor trajectory =
      golden.trajectory.defined() ? golden.trajectory.to(at::kCPU, at::kFloat).contiguous() : at::Tensor();
  const GoldenProvenance& p = golden.provenance;
  json header;
  header["__metadata__"] = ProvenanceToJson(p);
  header["__metadata__"]["format"] = kGoldenFormat;
  // A golden without a trajectory is written as version 1, which needs none.
  header["__metadata__"]["format_version"] =
      trajectory.defined() ? std::to_string(kGoldenFormatVersion) : "1";
  const uint64_t frames_bytes = static_cast<uint64_t>(frames.numel()) * 4;
  header["frames"] = TensorEntry(frames, 0);
  header["latents"] = TensorEntry(latents, frames_bytes);
  if (trajectory.defined())
    header["trajectory"] = TensorEntry(trajectory, frames_bytes + static_cast<uint64_t>(latents.numel()) * 4);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // safetensors pads the header to 8 bytes
  const std::string tmp = path + ".tmp." + std::to_string(getpid());  // one per writing process
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
    if (trajectory.defined()) {
      out.write(reinterpret_cast<const char*>(trajectory.data_ptr<float>()),
                static_cast<std::streamsize>(trajectory.numel() * 4));
    }
    if (!out.flush()) return Status::IoError(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError(path + ": cannot rename the temporary file into place");
  }
  return Status::Ok();
}

StatusOr<Golden> ReadGolden(const std::string& path) {
  StatusOr<std::string> bytes = ReadGoldenBytes(path);
  if (!bytes.ok()) return bytes.status();
  return ParseGolden(path, *bytes);
}

StatusOr<Golden> ParseGolden(const std::string& path, const std::string& bytes) {
  StatusOr<GoldenLayout> layout = ParseGoldenLayout(path, bytes);
  if (!layout.ok()) return layout.status();
  Golden golden;
  golden.frames = ToTensor(layout->frames);
  golden.latents = ToTensor(layout->latents);
  if (layout->trajectory.data != nullptr) golden.trajectory = ToTensor(layout->trajectory);
  golden.provenance = ProvenanceFromJson(layout->metadata);
  return golden;
}

Status CheckGoldenShapes(const std::string& path, const Golden& golden, const at::Tensor& frames,
                         const at::Tensor& latents) {
  for (const auto& [what, expected, made] : {std::make_tuple("frames", &golden.frames, &frames),
                                             std::make_tuple("latents", &golden.latents, &latents)}) {
    if (expected->sizes() != made->sizes()) {
      return Status::Corrupt(path + ": golden " + what + " " + c10::str(expected->sizes()) +
                             " but the cell made " + c10::str(made->sizes()));
    }
  }
  return Status::Ok();
}

}  // namespace framegate
