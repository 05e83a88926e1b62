// One pipeline config run end to end: builds the model (reference size or TorchScript
// package) under a policy on a device, samples, decodes. Every exception from the model
// is caught here and classified (harness/error_class.h): nothing escapes to the runner.
#pragma once

#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/cell_status.h"
#include "harness/error_class.h"
#include "harness/status.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/fault_cases.h"
#include "pipelines/sampler.h"

namespace framegate {

struct PipelineSpec {
  std::string size = "tiny";  // reference size, unless model_dir is set
  std::string model_dir;      // a TorchScript model package
  DtypePolicy policy;
  std::string device = "cpu";
  uint64_t seed = 0;
  uint64_t weight_seed = 0;
  FaultCase fault = FaultCase::kNone;
  std::optional<SamplerConfig> sampler;  // default: the size's or the package's
  // A free run keeps its latents before and after every step (a golden's trajectory)
  // when set; with `replay_trajectory` defined the run is a step replay from it instead
  // (ReplaySteps, sampler.h).
  bool keep_trajectory = false;
  at::Tensor replay_trajectory;

  // "reference:tiny" or "model:<name from model.toml>" (package name needs the manifest).
  std::string PipelineName() const;
};

struct PipelineOutcome {
  RunEnd kind = RunEnd::kFinished;  // kFinished, kError or kUnsupported
  ClassifiedError error;            // kError (and kUnsupported from an unsupported op)
  std::string unsupported;          // kUnsupported: why the device cannot run it
  GenerationResult result;          // kFinished
  std::string pipeline;             // "reference:tiny", "model:crosscheck"
  SamplerConfig sampler;            // what ran
  double load_seconds = 0;          // model creation and placement
  int64_t weight_bytes = 0;         // bytes of the stored weights on the device
  int64_t parameters = 0;
  std::string observed;  // VideoModel::ObservedSummary(): "" when everything is seen
  // VideoModel::TakeIslandInputMakers() of this run (finished or not).
  std::vector<std::string> island_input_makers;
  std::string fp8_out_of_range;  // VideoModel::WeightsOutOfFp8Range()
  // VideoModel::TakeLargestFp16Magnitude() of this run: under FP16 emulation of a package,
  // its largest finite |value| held in FP16 when past 65504 / 2; else 0.
  double largest_fp16_magnitude = 0;
};

// Models that RunPipeline built, kept for a later run of the same model, policy, device,
// weight seed and fault (seed, sampler and observers may differ): a process that runs
// cell after cell builds each model once. A run with a kept model gives the same frames
// as a run that builds it (pipeline_run_test.cc). A model whose run threw is not kept.
// Holds at most `capacity` models, dropping the least recently used.
class ModelCache {
 public:
  explicit ModelCache(size_t capacity = 2) : capacity_(capacity) {}
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;

  // What RunPipeline keeps of a built model: the model and the facts of its creation.
  struct Entry {
    std::string key;
    std::unique_ptr<VideoModel> model;
    std::string pipeline;
    SamplerConfig sampler;
    int64_t weight_bytes = 0;
    int64_t parameters = 0;
  };
  // The entry kept for `key`, taken out of the cache; nullopt when there is none.
  std::optional<Entry> Take(const std::string& key);
  void Keep(Entry entry);
  size_t size() const { return entries_.size(); }
  int builds() const { return builds_; }  // models built through this cache
  void CountBuild() { ++builds_; }

 private:
  size_t capacity_;
  int builds_ = 0;
  std::list<Entry> entries_;  // most recently kept first
};

// Bad input (unknown size, broken package, bad device) is a Status; everything that
// happens while running is a PipelineOutcome. With `models`, the model is taken from and
// given back to that cache (load_seconds is then 0 for a reused model).
StatusOr<PipelineOutcome> RunPipeline(const PipelineSpec& spec, const ModuleObserver& on_module = nullptr,
                                      const StepObserver& on_step = nullptr, ModelCache* models = nullptr);

// Every weight of the pipeline (parameters and floating buffers) with its number of
// elements, named as FP32 islands name modules: "blocks.0.ff.0.weight" (reference model),
// "denoiser.blocks.0.ff.0.weight" (package). Built in FP32 on the CPU.
struct WeightSize {
  std::string name;
  int64_t numel = 0;
};
StatusOr<std::vector<WeightSize>> ListWeightSizes(const PipelineSpec& spec);
// The share of `weights` (by elements) that `policy` keeps in FP32 (DtypePolicy::
// KeepsWeightInFp32); 0 for none (op islands keep no weights).
double Fp32WeightFraction(const std::vector<WeightSize>& weights, const DtypePolicy& policy);

// Parses "cpu" / "cpu:<kernel path>" / "cuda:N"; Unsupported when this build lacks the
// device; InvalidInput for a kernel path this process's ATEN_CPU_CAPABILITY does not pick.
StatusOr<c10::Device> ParseDevice(const std::string& text);

}  // namespace framegate
