#include "pipelines/pipeline_run.h"

#include <chrono>
#include <cstdlib>

#include <ATen/Context.h>

#include "harness/torch_version.h"
#include "pipelines/model_package.h"
#if FRAMEGATE_WITH_CUDA
#include "pipelines/cuda/attention_backend.h"
#endif
#include "pipelines/reference_model.h"

namespace framegate {

std::string PipelineSpec::PipelineName() const {
  return model_dir.empty() ? "reference:" + size : "model:" + model_dir;
}

StatusOr<c10::Device> ParseDevice(const std::string& text) {
  if (text.rfind("cpu:", 0) == 0) {           // an ATen CPU kernel path: the CPU, in a process
    const std::string path = text.substr(4);  // whose ATEN_CPU_CAPABILITY picks it
    if (path != "avx512" && path != "avx2" && path != "default")
      return Status::InvalidInput("device '" + text +
                                  "' is not a device (expected cpu, "
                                  "cpu:avx512, cpu:avx2, cpu:default or cuda:N)");
    const char* env = std::getenv("ATEN_CPU_CAPABILITY");
    if (env == nullptr || path != env)
      return Status::InvalidInput("device '" + text + "' needs ATEN_CPU_CAPABILITY=" + path +
                                  " in this process's environment (framegate sets it when it "
                                  "starts the process)");
    return c10::Device(c10::kCPU);
  }
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

StatusOr<std::vector<WeightSize>> ListWeightSizes(const PipelineSpec& spec) {
  std::vector<WeightSize> sizes;
  const c10::Device cpu(c10::kCPU);
  if (!spec.model_dir.empty()) {
    StatusOr<std::vector<PackageTensor>> tensors = ListPackageTensors(spec.model_dir, Fp32Policy(), cpu);
    if (!tensors.ok()) return tensors.status();
    for (const PackageTensor& t : *tensors) {
      if (c10::isFloatingType(t.dtype)) sizes.push_back({t.name, t.numel});
    }
    return sizes;
  }
  StatusOr<ReferenceSize> size = FindReferenceSize(spec.size);
  if (!size.ok()) return size.status();
  StatusOr<std::unique_ptr<ReferenceModel>> model =
      ReferenceModel::Create(*size, Fp32Policy(), cpu, spec.weight_seed, spec.fault);
  if (!model.ok()) return model.status();
  for (const WeightEntry& w : (*model)->weights().entries()) sizes.push_back({w.name, w.master.numel()});
  return sizes;
}

double Fp32WeightFraction(const std::vector<WeightSize>& weights, const DtypePolicy& policy) {
  int64_t total = 0, kept = 0;
  for (const WeightSize& w : weights) {
    total += w.numel;
    if (policy.KeepsWeightInFp32(w.name)) kept += w.numel;
  }
  return total > 0 ? static_cast<double>(kept) / static_cast<double>(total) : 0.0;
}

namespace {

// The device's numeric switches for the policy. On CUDA the real ones (cuBLAS/cuDNN TF32
// and reduced-precision reduction, the SDPA backend), recorded as in force; on the CPU
// the accumulation is emulated by the model (AccumulationOf) and the attention paths are
// SDPA's math and flash kernels from LibTorch 2.2 on, the math path alone before. Returns what to record, or
// the reason the device cannot run the policy.
struct DeviceNumerics {
  std::string recorded;
  std::string unsupported;
};
DeviceNumerics ApplyDeviceNumerics(const DtypePolicy& policy, c10::Device device) {
  DeviceNumerics n;
  const std::string& backend = policy.attention_backend;
  if (device.is_cpu()) {
#if FRAMEGATE_TORCH_AT_LEAST(2, 2)  // kCpuHasFlashAttention
    // SDPA's CPU kernels: math and flash, picked by the process-wide switches. Every cell
    // sets them (a cell without a backend allows both, LibTorch's default), so that one
    // cell's choice never reaches the next cell of the same process.
    if (!backend.empty() && backend != "math" && backend != "flash") {
      n.unsupported =
          "attention backend '" + backend + "': the CPU has only the math and flash attention paths";
      return n;
    }
    at::globalContext().setSDPUseFlash(backend.empty() || backend == "flash");
    at::globalContext().setSDPUseMath(backend.empty() || backend == "math");
    if (!backend.empty()) n.recorded = "attention: " + backend + " (SDPA on the CPU)";
#else
    if (!backend.empty() && backend != "math") {
      n.unsupported = "attention backend '" + backend + "': the CPU build has only the math attention path";
    } else if (backend == "math") {
      n.recorded = "attention: math (the CPU build's only path)";
    }
#endif
    return n;
  }
#if FRAMEGATE_WITH_CUDA
  cuda::CudaPrecisionFlags flags;
  flags.tf32_cublas = flags.tf32_cudnn = policy.allow_tf32;
  flags.fp16_reduction_cublas = policy.fp16_reduced_precision_reduction;
  flags.bf16_reduction_cublas = policy.bf16_reduced_precision_reduction;
  n.recorded = "native on CUDA: " + cuda::ApplyPrecisionFlags(flags).ToString();
  if (!backend.empty()) {
    cuda::SdpaBackends only;
    only.flash = backend == "flash";
    only.mem_efficient = backend == "mem_efficient";
    only.math = backend == "math";
    only.cudnn = backend == "cudnn";
    const cuda::SdpaBackends in_force = cuda::ApplySdpaBackends(only);
    n.recorded += "; attention: " + in_force.ToString();
    if (in_force.ToString() == "none") {
      n.unsupported = "attention backend '" + backend + "': this LibTorch has no switch for it";
    }
  }
#endif
  return n;
}

std::string JoinNotes(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  return b.empty() ? a : a + "; " + b;
}

}  // namespace

std::optional<ModelCache::Entry> ModelCache::Take(const std::string& key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key != key) continue;
    Entry entry = std::move(*it);
    entries_.erase(it);
    return entry;
  }
  return std::nullopt;
}

void ModelCache::Keep(Entry entry) {
  if (capacity_ == 0) return;
  entries_.push_front(std::move(entry));
  while (entries_.size() > capacity_) entries_.pop_back();
}

namespace {

// What makes two runs' models the same: everything that builds the model, nothing that
// only drives the sampler.
std::string ModelKey(const PipelineSpec& spec) {
  return (spec.model_dir.empty() ? "size:" + spec.size : "model:" + spec.model_dir) +
         "\ndevice:" + spec.device + "\nweight_seed:" + std::to_string(spec.weight_seed) +
         "\nfault:" + std::to_string(static_cast<int>(spec.fault)) +
         "\nfp16_headroom_bits:" + std::to_string(spec.policy.fp16_headroom_bits) + "\npolicy:\n" +
         spec.policy.ToToml();
}

// Builds the model of `spec` into `built`; a model this device cannot run sets
// `outcome` to kUnsupported and leaves `built.model` empty.
Status BuildModel(const PipelineSpec& spec, c10::Device device, ModelCache::Entry& built,
                  PipelineOutcome& outcome) {
  if (!spec.model_dir.empty()) {
    if (spec.fault != FaultCase::kNone)
      return Status::InvalidInput("fault cases apply to the reference pipeline, not to --model");
    StatusOr<ModelManifest> manifest = ReadModelManifest(spec.model_dir);
    if (!manifest.ok()) return manifest.status();
    built.pipeline = outcome.pipeline = "model:" + manifest->name;
    built.sampler = manifest->sampler;
    try {
      StatusOr<std::unique_ptr<VideoModel>> loaded = LoadModelPackage(spec.model_dir, spec.policy, device);
      if (!loaded.ok()) {
        // A package that cannot run this policy here (no fp16 kernels) is not broken.
        const ClassifiedError e = ClassifyError(loaded.status().message());
        if (e.cls != ErrorClass::kUnsupportedOp) return loaded.status();
        outcome.kind = RunEnd::kUnsupported;
        outcome.error = e;
        outcome.unsupported = e.Reason();
        return Status::Ok();
      }
      built.model = std::move(*loaded);
    } catch (const std::exception& e) {
      return Status::InvalidInput(spec.model_dir + ": " + ClassifyError(e.what()).message);
    }
    return Status::Ok();
  }
  StatusOr<ReferenceSize> size = FindReferenceSize(spec.size);
  if (!size.ok()) return size.status();
  built.pipeline = outcome.pipeline = "reference:" + size->name;
  built.sampler = size->sampler;
  StatusOr<std::unique_ptr<ReferenceModel>> created =
      ReferenceModel::Create(*size, spec.policy, device, spec.weight_seed, spec.fault);
  if (!created.ok()) {
    if (created.status().code() != Status::Code::kUnsupported) return created.status();
    outcome.kind = RunEnd::kUnsupported;
    outcome.unsupported = created.status().message();
    return Status::Ok();
  }
  built.weight_bytes = (*created)->weights().StoredBytes();
  built.parameters = (*created)->weights().NumParameters();
  built.model = std::move(*created);
  return Status::Ok();
}

}  // namespace

StatusOr<PipelineOutcome> RunPipeline(const PipelineSpec& spec, const ModuleObserver& on_module,
                                      const StepObserver& on_step, ModelCache* models) {
  StatusOr<c10::Device> device = ParseDevice(spec.device);
  if (!device.ok()) return device.status();
  PipelineOutcome outcome;
  const DeviceNumerics numerics = ApplyDeviceNumerics(spec.policy, *device);
  if (!numerics.unsupported.empty()) {
    outcome.kind = RunEnd::kUnsupported;
    outcome.unsupported = numerics.unsupported;
    outcome.pipeline = spec.PipelineName();
    return outcome;
  }
  const auto load_start = std::chrono::steady_clock::now();
  const std::string key = models != nullptr ? ModelKey(spec) : "";
  std::optional<ModelCache::Entry> kept = models != nullptr ? models->Take(key) : std::nullopt;
  ModelCache::Entry built;
  if (kept) {
    built = std::move(*kept);
  } else {
    built.key = key;
    FG_RETURN_IF_ERROR(BuildModel(spec, *device, built, outcome));
    if (outcome.kind == RunEnd::kUnsupported) return outcome;
    if (models != nullptr) models->CountBuild();
  }
  VideoModel& model = *built.model;
  outcome.pipeline = built.pipeline;
  outcome.sampler = spec.sampler ? *spec.sampler : built.sampler;
  outcome.weight_bytes = built.weight_bytes;
  outcome.parameters = built.parameters;
  outcome.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  model.SetObserver(on_module);
  outcome.observed = JoinNotes(model.ObservedSummary(), numerics.recorded);
  outcome.fp8_out_of_range = model.WeightsOutOfFp8Range();
  model.TakeIslandInputMakers();  // a kept model's last run's
  model.TakeLargestFp16Magnitude();

  bool threw = true;
  // A model that draws random numbers itself (noise augmentation: torch.randn in its
  // forward) draws the same ones in every run of the cell: the golden's, the policy's, the
  // shadow's.
  at::manual_seed(spec.seed);
  try {
    outcome.result = spec.replay_trajectory.defined()
                         ? ReplaySteps(model, outcome.sampler, spec.seed, spec.replay_trajectory, on_step)
                         : Generate(model, outcome.sampler, spec.seed, on_step, spec.keep_trajectory);
    threw = false;
  } catch (const std::bad_alloc&) {
    outcome.kind = RunEnd::kError;
    outcome.error = ClassifyModelError("bad_alloc: out of memory", model);
  } catch (const std::exception& e) {  // c10::Error, TorchScript interpreter errors
    outcome.error = ClassifyModelError(e.what(), model);
    outcome.kind = outcome.error.cls == ErrorClass::kUnsupportedOp ? RunEnd::kUnsupported : RunEnd::kError;
    if (outcome.kind == RunEnd::kUnsupported) outcome.unsupported = outcome.error.Reason();
  }
  model.SetObserver(nullptr);
  outcome.island_input_makers = model.TakeIslandInputMakers();
  outcome.largest_fp16_magnitude = model.TakeLargestFp16Magnitude();
  if (models != nullptr && !threw) models->Keep(std::move(built));
  return outcome;
}

}  // namespace framegate
