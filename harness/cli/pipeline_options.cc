// The options every command that runs a pipeline shares, parsed in one place.
#include "harness/cli/commands.h"
#include "pipelines/pipeline_config.h"
#include "pipelines/model_package.h"

namespace framegate {

void AddPipelineOptions(CLI::App* app, PipelineCliOptions* o) {
  auto* size = app->add_option("--size", o->size, "Reference pipeline size: tiny, small, large")
                   ->capture_default_str();
  app->add_option("--model", o->model_dir, "A TorchScript model package folder instead of --size")
      ->check(CLI::ExistingDirectory)
      ->excludes(size);
  app->add_option("--policy", o->policy,
                  "Dtype policy preset: fp32, bf16, fp16, fp16-fp32norm, fp16-emulated, "
                  "fp8e4m3-bf16, fp8e5m2-bf16, tf32, fp16-reduced-accum")
      ->capture_default_str();
  app->add_option("--device", o->device, "Device: cpu or cuda:N")->capture_default_str();
  app->add_option("--seed", o->seed, "Seed of the initial noise and conditioning")
      ->capture_default_str();
  app->add_option("--weight-seed", o->weight_seed, "Seed of the reference model's weights")
      ->capture_default_str();
  app->add_option("--fault", o->fault,
                  "Fault case to build into the reference model: time-embed-fp32, "
                  "attn-overflow, activation-overflow, input-fp32, fp8-no-upcast");
  app->add_option("--steps", o->steps, "Sampler steps (default: the size's or the package's)")
      ->check(CLI::PositiveNumber);
  app->add_option("--sampler", o->sampler, "Sampler: ddim or euler (default: the size's)")
      ->check(CLI::IsMember({"ddim", "euler"}));
  app->add_option("--guidance", o->guidance, "Classifier-free guidance scale (>= 1)")
      ->check(CLI::Range(1.0, 100.0));
}

StatusOr<PipelineSpec> PipelineCliOptions::ToSpec() const {
  PipelineSpec spec;
  spec.size = size;
  spec.model_dir = model_dir;
  spec.device = device;
  spec.seed = seed;
  spec.weight_seed = weight_seed;
  StatusOr<DtypePolicy> p = FindPolicy(policy);
  if (!p.ok()) return p.status();
  spec.policy = *p;
  const std::optional<FaultCase> f = ParseFaultCase(fault);
  if (!f) {
    std::string known;
    for (const FaultCaseInfo& info : FaultCases()) known += (known.empty() ? "" : ", ") + std::string(info.name);
    return Status::InvalidInput("unknown fault case '" + fault + "' (known: " + known + ")");
  }
  spec.fault = *f;
  if (steps > 0 || guidance > 0 || !sampler.empty()) {
    SamplerConfig config;
    if (model_dir.empty()) {
      StatusOr<ReferenceSize> s = FindReferenceSize(size);
      if (!s.ok()) return s.status();
      config = s->sampler;
    } else {
      StatusOr<ModelManifest> m = ReadModelManifest(model_dir);
      if (!m.ok()) return m.status();
      config = m->sampler;
    }
    if (steps > 0) config.steps = steps;
    if (guidance > 0) config.guidance = guidance;
    if (!sampler.empty()) config.kind = *ParseSamplerKind(sampler);
    spec.sampler = config;
  }
  return spec;
}

}  // namespace framegate
