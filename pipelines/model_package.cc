#include "pipelines/model_package.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <torch/script.h>
#include <toml++/toml.h>

#include "harness/error_class.h"
#include "harness/toml_source.h"

namespace framegate {
namespace {

std::string ShapeString(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

class TorchScriptModel : public VideoModel {
 public:
  TorchScriptModel(ModelManifest manifest, torch::jit::Module denoiser,
                   torch::jit::Module decoder, c10::ScalarType dtype, c10::Device device)
      : manifest_(std::move(manifest)),
        denoiser_(std::move(denoiser)),
        decoder_(std::move(decoder)),
        dtype_(dtype),
        device_(device) {}

  const LatentGeometry& geometry() const override { return manifest_.latent; }
  c10::Device device() const override { return device_; }
  c10::ScalarType latent_dtype() const override { return dtype_; }

  at::Tensor PredictNoise(const at::Tensor& x, const at::Tensor& t,
                          const at::Tensor& cond) override {
    return denoiser_.forward({x, t, cond}).toTensor();
  }
  at::Tensor Decode(const at::Tensor& z) override { return decoder_.forward({z}).toTensor(); }

 private:
  ModelManifest manifest_;
  torch::jit::Module denoiser_, decoder_;
  c10::ScalarType dtype_;
  c10::Device device_;
};

StatusOr<torch::jit::Module> LoadScript(const std::string& path, const DtypePolicy& policy,
                                        c10::Device device) {
  if (!std::filesystem::exists(path)) return Status::NotFound(path + ": file is missing");
  try {
    torch::jit::Module module = torch::jit::load(path, device);
    module.eval();
    module.to(device, policy.compute);
    return module;
  } catch (const std::exception& e) {
    return Status::Corrupt(path + ": not a loadable TorchScript module: " +
                           ClassifyError(e.what()).message);
  }
}

}  // namespace

StatusOr<ModelManifest> ReadModelManifest(const std::string& dir) {
  const std::string path = dir + "/model.toml";
  if (!std::filesystem::exists(path)) return Status::NotFound(path + ": file is missing");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<toml::table> manifest = ParseTomlText(text.str(), path);
  if (!manifest.ok()) return manifest.status();
  const toml::table& table = *manifest;
  ModelManifest m;
  Status error;
  auto integer = [&](const char* section, const char* key, int64_t* out) {
    const auto value = table[section][key].value<int64_t>();
    if (!value || *value <= 0) {
      if (error.ok())
        error = Status::InvalidInput(path + ": [" + section + "] " + key +
                                     " must be a positive integer");
      return;
    }
    *out = *value;
  };
  const auto name = table["name"].value<std::string>();
  if (!name) return Status::InvalidInput(path + ": missing key 'name' (a string)");
  m.name = *name;
  integer("latent", "channels", &m.latent.channels);
  integer("latent", "frames", &m.latent.frames);
  integer("latent", "height", &m.latent.height);
  integer("latent", "width", &m.latent.width);
  integer("cond", "tokens", &m.latent.cond_tokens);
  integer("cond", "dim", &m.latent.cond_dim);
  int64_t steps = 0;
  integer("sampler", "steps", &steps);
  FG_RETURN_IF_ERROR(error);
  m.sampler.steps = static_cast<int>(steps);
  const auto kind = table["sampler"]["kind"].value<std::string>();
  const auto parsed = kind ? ParseSamplerKind(*kind) : std::nullopt;
  if (!parsed) return Status::InvalidInput(path + ": [sampler] kind must be \"ddim\" or \"euler\"");
  m.sampler.kind = *parsed;
  const auto guidance = table["sampler"]["guidance"].value<double>();
  if (!guidance || *guidance < 1.0)
    return Status::InvalidInput(path + ": [sampler] guidance must be a number >= 1");
  m.sampler.guidance = *guidance;
  return m;
}

StatusOr<std::unique_ptr<VideoModel>> LoadModelPackage(const std::string& dir,
                                                       const DtypePolicy& policy,
                                                       c10::Device device) {
  StatusOr<ModelManifest> manifest = ReadModelManifest(dir);
  if (!manifest.ok()) return manifest.status();
  StatusOr<torch::jit::Module> denoiser = LoadScript(dir + "/denoiser.pt", policy, device);
  if (!denoiser.ok()) return denoiser.status();
  StatusOr<torch::jit::Module> decoder = LoadScript(dir + "/decoder.pt", policy, device);
  if (!decoder.ok()) return decoder.status();
  auto model = std::make_unique<TorchScriptModel>(*manifest, std::move(*denoiser),
                                                  std::move(*decoder), policy.compute, device);

  // The contract, checked once on zeros: shapes and dtypes in, shapes and dtypes out.
  const LatentGeometry& g = manifest->latent;
  const auto opts = at::TensorOptions().dtype(policy.compute).device(device);
  const at::Tensor x = at::zeros({1, g.channels, g.frames, g.height, g.width}, opts);
  const at::Tensor cond = at::zeros({1, g.cond_tokens, g.cond_dim}, opts);
  const at::Tensor t = at::full({1}, 999.0, at::TensorOptions().dtype(at::kFloat).device(device));
  at::Tensor eps, frames;
  try {
    eps = model->PredictNoise(x, t, cond);
  } catch (const std::exception& e) {
    return Status::InvalidInput(dir + "/denoiser.pt: forward(x, t, cond) failed: " +
                                ClassifyError(e.what()).message);
  }
  if (eps.sizes() != x.sizes()) {
    return Status::InvalidInput(dir + "/denoiser.pt: output shape " + ShapeString(eps) +
                                " differs from the input shape " + ShapeString(x));
  }
  if (eps.scalar_type() != policy.compute) {
    return Status::InvalidInput(dir + "/denoiser.pt: output dtype " +
                                std::string(c10::toString(eps.scalar_type())) +
                                " differs from the input dtype " +
                                std::string(c10::toString(policy.compute)));
  }
  try {
    frames = model->Decode(x);
  } catch (const std::exception& e) {
    return Status::InvalidInput(dir + "/decoder.pt: forward(z) failed: " +
                                ClassifyError(e.what()).message);
  }
  if (frames.dim() != 5 || frames.size(0) != 1 || frames.size(1) != 3 ||
      frames.size(2) != g.frames) {
    return Status::InvalidInput(dir + "/decoder.pt: output shape " + ShapeString(frames) +
                                " is not [1, 3, " + std::to_string(g.frames) + ", H, W]");
  }
  if (frames.scalar_type() != policy.compute) {
    return Status::InvalidInput(dir + "/decoder.pt: output dtype " +
                                std::string(c10::toString(frames.scalar_type())) +
                                " differs from the input dtype " +
                                std::string(c10::toString(policy.compute)));
  }
  return std::unique_ptr<VideoModel>(std::move(model));
}

StatusOr<std::vector<PackageTensor>> ListPackageTensors(const std::string& dir,
                                                        const DtypePolicy& policy,
                                                        c10::Device device) {
  std::vector<PackageTensor> tensors;
  for (const char* part : {"denoiser", "decoder"}) {
    StatusOr<torch::jit::Module> module =
        LoadScript(dir + "/" + part + ".pt", policy, device);
    if (!module.ok()) return module.status();
    for (const auto& p : module->named_parameters(/*recurse=*/true))
      tensors.push_back({std::string(part) + "." + p.name, p.value.scalar_type()});
    for (const auto& b : module->named_buffers(/*recurse=*/true))
      tensors.push_back({std::string(part) + "." + b.name, b.value.scalar_type()});
  }
  return tensors;
}

}  // namespace framegate
