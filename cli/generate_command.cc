// framegate generate: one pipeline config on one device. Writes the frames as PNG files,
// frames.npy (float32 [T, H, W, 3] in [0, 1]), latents.npy and generation.json.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "harness/build_info.h"
#include "harness/npy.h"
#include "harness/png_frames.h"
#include "pipelines/pipeline_run.h"

namespace framegate {
namespace {

struct GenerateOptions {
  PipelineCliOptions pipeline;
  std::string out_dir;
  int threads = 0;
  bool activation_stats = false;
};

// Per module: the largest |value| of its output over every step (and the decode).
using ActivationAbsmax = std::map<std::string, double>;

Status WriteOutputs(const std::string& dir, const GenerationResult& result) {
  const at::Tensor& frames = result.frames;  // [T, H, W, 3]
  FG_RETURN_IF_ERROR(WriteNpyFloat32(dir + "/frames.npy",
                                     std::vector<int64_t>(frames.sizes().begin(), frames.sizes().end()),
                                     frames.data_ptr<float>()));
  const at::Tensor latents = result.latents.contiguous();
  FG_RETURN_IF_ERROR(WriteNpyFloat32(dir + "/latents.npy",
                                     std::vector<int64_t>(latents.sizes().begin(), latents.sizes().end()),
                                     latents.data_ptr<float>()));
  StatusOr<std::vector<std::string>> pngs =
      WriteFramePngs(dir, frames.data_ptr<float>(), frames.size(0), frames.size(1), frames.size(2));
  return pngs.ok() ? Status::Ok() : pngs.status();
}

int RunGenerate(const GenerateOptions& o) {
  ConfigureThreads(o.threads);
  StatusOr<PipelineSpec> spec = o.pipeline.ToSpec();
  if (!spec.ok()) return ReportError(spec.status());
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return ReportError(Status::IoError(o.out_dir + ": cannot create: " + ec.message()));

  ActivationAbsmax absmax;
  ModuleObserver observer;
  if (o.activation_stats) {
    observer = [&absmax](const ModuleOutput& out) {
      double& m = absmax[out.module];
      m = std::max(m, out.value.abs().max().item<double>());
    };
  }
  StatusOr<PipelineOutcome> outcome = RunPipeline(*spec, observer);
  if (!outcome.ok()) return ReportError(outcome.status());
  if (outcome->kind == RunEnd::kUnsupported) {
    std::cerr << "framegate: unsupported: " << outcome->unsupported << "\n";
    return kExitFailed;
  }
  if (outcome->kind == RunEnd::kError) {
    std::cerr << "framegate: error: " << outcome->error.Reason() << "\n";
    return kExitFailed;
  }
  const GenerationResult& result = outcome->result;
  const Status written = WriteOutputs(o.out_dir, result);
  if (!written.ok()) return ReportError(written);

  double steps_total = 0;
  for (double s : result.step_seconds) steps_total += s;
  const SamplerConfig& sampler = outcome->sampler;
  const nlohmann::json record = {
      {"pipeline", outcome->pipeline},
      {"device", spec->device},
      {"policy", spec->policy.name},
      {"fault", FaultCaseName(spec->fault)},
      // Accumulation flags are part of the policy; they take effect only on CUDA.
      {"accumulation",
       {{"allow_tf32", spec->policy.allow_tf32},
        {"fp16_reduced_precision_reduction", spec->policy.fp16_reduced_precision_reduction},
        {"applicable", spec->device.rfind("cuda", 0) == 0}}},
      {"seed", spec->seed},
      {"weight_seed", spec->weight_seed},
      {"sampler",
       {{"kind", SamplerKindName(sampler.kind)}, {"steps", sampler.steps}, {"guidance", sampler.guidance}}},
      {"frames_shape", result.frames.sizes().vec()},
      {"load_seconds", outcome->load_seconds},
      {"step_seconds", result.step_seconds},
      {"decode_seconds", result.decode_seconds},
      {"weight_bytes", outcome->weight_bytes},
      {"threads", at::get_num_threads()},
  };
  std::ofstream(o.out_dir + "/generation.json") << record.dump(2) << "\n";
  if (o.activation_stats) {
    std::ofstream(o.out_dir + "/activations.json") << nlohmann::json(absmax).dump(2) << "\n";
  }
  std::cout << outcome->pipeline << " on " << spec->device << " (" << spec->policy.name << ", seed "
            << spec->seed << "): " << result.frames.size(0) << " frames " << result.frames.size(2) << "x"
            << result.frames.size(1) << ", " << sampler.steps << " " << SamplerKindName(sampler.kind)
            << " steps in " << steps_total << " s, decode " << result.decode_seconds << " s -> " << o.out_dir
            << "\n";
  return kExitOk;
}

}  // namespace

Command AddGenerateCommand(CLI::App& parent) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* app = parent.add_subcommand(
      "generate", "Run one pipeline config on one device and write its frames (PNG + frames.npy)");
  AddPipelineOptions(app, &o->pipeline);
  app->add_option("--out", o->out_dir, "Output folder")->required();
  app->add_flag("--activation-stats", o->activation_stats,
                "Also write activations.json: each module's output absmax over the run");
  AddThreadsOption(app, &o->threads);
  return {app, [o] { return RunGenerate(*o); }};
}

}  // namespace framegate
