// framegate generate: one pipeline config on one device. Writes the frames as PNG files,
// frames.npy (float32 [T, H, W, 3] in [0, 1]), latents.npy and generation.json.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include <ATen/Parallel.h>

#include "harness/build_info.h"
#include "harness/cli/commands.h"
#include "harness/npy.h"
#include "harness/png_frames.h"
#include "pipelines/model_package.h"
#include "pipelines/reference_model.h"
#include "pipelines/sampler.h"

namespace framegate {
namespace {

struct GenerateOptions {
  std::string size = "tiny";
  std::string model_dir;
  std::string device = "cpu";
  std::string out_dir;
  std::string sampler;
  uint64_t seed = 0;
  uint64_t weight_seed = 0;
  int steps = 0;
  double guidance = 0;
  int threads = 0;
};

StatusOr<c10::Device> ParseDevice(const std::string& text) {
  try {
    c10::Device device(text);
    if (device.is_cuda() && !at::hasCUDA())
      return Status::Unsupported("device '" + text + "': this LibTorch has no CUDA");
    if (!device.is_cpu() && !device.is_cuda())
      return Status::Unsupported("device '" + text + "': only cpu and cuda are supported");
    return device;
  } catch (const c10::Error&) {
    return Status::InvalidInput("device '" + text + "' is not a device (expected cpu or cuda:N)");
  }
}

int RunGenerate(const GenerateOptions& o) {
  ConfigureThreads(o.threads);
  StatusOr<c10::Device> device = ParseDevice(o.device);
  if (!device.ok()) return ReportError(device.status());
  const DtypePolicy policy = Fp32Policy();

  std::unique_ptr<VideoModel> model;
  SamplerConfig sampler;
  std::string pipeline;
  if (!o.model_dir.empty()) {
    StatusOr<ModelManifest> manifest = ReadModelManifest(o.model_dir);
    if (!manifest.ok()) return ReportError(manifest.status());
    StatusOr<std::unique_ptr<VideoModel>> loaded = LoadModelPackage(o.model_dir, policy, *device);
    if (!loaded.ok()) return ReportError(loaded.status());
    model = std::move(*loaded);
    sampler = manifest->sampler;
    pipeline = "model:" + manifest->name;
  } else {
    StatusOr<ReferenceSize> size = FindReferenceSize(o.size);
    if (!size.ok()) return ReportError(size.status());
    StatusOr<std::unique_ptr<ReferenceModel>> created =
        ReferenceModel::Create(*size, policy, *device, o.weight_seed);
    if (!created.ok()) return ReportError(created.status());
    model = std::move(*created);
    sampler = size->sampler;
    pipeline = "reference:" + size->name;
  }
  if (o.steps > 0) sampler.steps = o.steps;
  if (o.guidance > 0) sampler.guidance = o.guidance;
  if (!o.sampler.empty()) sampler.kind = *ParseSamplerKind(o.sampler);

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return ReportError(Status::IoError(o.out_dir + ": cannot create: " + ec.message()));

  GenerationResult result;
  try {
    result = Generate(*model, sampler, o.seed);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    return ReportError(Status::Internal("generation failed: " + what.substr(0, what.find('\n'))));
  }

  const at::Tensor& frames = result.frames;  // [T, H, W, 3]
  const std::vector<int64_t> frame_shape(frames.sizes().begin(), frames.sizes().end());
  const std::vector<int64_t> latent_shape(result.latents.sizes().begin(), result.latents.sizes().end());
  Status status = WriteNpyFloat32(o.out_dir + "/frames.npy", frame_shape, frames.data_ptr<float>());
  if (status.ok()) {
    status = WriteNpyFloat32(o.out_dir + "/latents.npy", latent_shape,
                             result.latents.contiguous().data_ptr<float>());
  }
  if (!status.ok()) return ReportError(status);
  StatusOr<std::vector<std::string>> pngs = WriteFramePngs(
      o.out_dir, frames.data_ptr<float>(), frames.size(0), frames.size(1), frames.size(2));
  if (!pngs.ok()) return ReportError(pngs.status());

  double steps_total = 0;
  for (double s : result.step_seconds) steps_total += s;
  const nlohmann::json record = {
      {"pipeline", pipeline},
      {"device", device->str()},
      {"policy", policy.name},
      {"seed", o.seed},
      {"weight_seed", o.weight_seed},
      {"sampler", {{"kind", SamplerKindName(sampler.kind)}, {"steps", sampler.steps},
                   {"guidance", sampler.guidance}}},
      {"frames_shape", frame_shape},
      {"step_seconds", result.step_seconds},
      {"decode_seconds", result.decode_seconds},
      {"threads", at::get_num_threads()},
  };
  std::ofstream(o.out_dir + "/generation.json") << record.dump(2) << "\n";
  std::cout << pipeline << " on " << device->str() << " (" << policy.name << ", seed " << o.seed
            << "): " << frames.size(0) << " frames " << frames.size(2) << "x" << frames.size(1)
            << ", " << sampler.steps << " " << SamplerKindName(sampler.kind) << " steps in "
            << steps_total << " s, decode " << result.decode_seconds << " s -> " << o.out_dir
            << "\n";
  return kExitOk;
}

}  // namespace

Command AddGenerateCommand(CLI::App& parent) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* app = parent.add_subcommand(
      "generate", "Run one pipeline config on one device and write its frames (PNG + frames.npy)");
  auto* size = app->add_option("--size", o->size, "Reference pipeline size: tiny, small, large")
                   ->capture_default_str();
  app->add_option("--model", o->model_dir, "A TorchScript model package folder instead of --size")
      ->check(CLI::ExistingDirectory)
      ->excludes(size);
  app->add_option("--device", o->device, "Device: cpu or cuda:N")->capture_default_str();
  app->add_option("--seed", o->seed, "Seed of the initial noise and conditioning")
      ->capture_default_str();
  app->add_option("--weight-seed", o->weight_seed, "Seed of the reference model's weights")
      ->capture_default_str();
  app->add_option("--steps", o->steps, "Sampler steps (default: the size's or the package's)")
      ->check(CLI::PositiveNumber);
  app->add_option("--sampler", o->sampler, "Sampler: ddim or euler (default: the size's)")
      ->check(CLI::IsMember({"ddim", "euler"}));
  app->add_option("--guidance", o->guidance, "Classifier-free guidance scale (>= 1)")
      ->check(CLI::Range(1.0, 100.0));
  app->add_option("--out", o->out_dir, "Output folder")->required();
  AddThreadsOption(app, &o->threads);
  return {app, [o] { return RunGenerate(*o); }};
}

}  // namespace framegate
