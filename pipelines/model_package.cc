#include "pipelines/model_package.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <c10/core/GradMode.h>
#include <toml++/toml.h>
#include <torch/script.h>

#include "harness/error_class.h"
#include "harness/name_rules.h"
#include "harness/number_limits.h"
#include "harness/toml_source.h"
#include "pipelines/fp8_codec.h"
#include "pipelines/graph_instrumentation.h"
#include "pipelines/module_shadow.h"
#include "pipelines/op_islands.h"
#include "pipelines/package_observer.h"
#include "pipelines/weight_store.h"
#include "pipelines/weighted_ops.h"

namespace framegate {
namespace {

std::string ShapeString(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// A package's module with its graphs instrumented (graph_instrumentation.h).
struct InstrumentedModule {
  std::string root;  // "denoiser" or "decoder"
  torch::jit::Module module;
  std::unique_ptr<GraphInstrumentation> instrumentation;
  std::vector<std::string> complex_cast;      // ApplyPolicy: complex tensors made real ("denoiser.freqs")
  std::vector<std::string> out_of_fp8_range;  // ApplyPolicy: VideoModel::WeightsOutOfFp8Range, one per tensor
};

class TorchScriptModel : public VideoModel {
 public:
  TorchScriptModel(ModelManifest manifest, InstrumentedModule denoiser, InstrumentedModule decoder,
                   const DtypePolicy& policy, c10::Device device)
      : manifest_(std::move(manifest)),
        denoiser_(std::move(denoiser)),
        decoder_(std::move(decoder)),
        observer_(policy, device.is_cpu()),
        device_(device) {
    for (const InstrumentedModule* m : {&denoiser_, &decoder_}) {
      // Every tensor attribute and constant first; the parameters and buffers among the
      // attributes are set again.
      for (const at::Tensor& constant : m->instrumentation->tensor_constants())
        observer_.AddUnconverted(constant);
      for (const auto& a : m->module.named_attributes(/*recurse=*/true))
        if (a.value.isTensor()) observer_.AddUnconverted(a.value.toTensor());
      for (const auto& p : m->module.named_parameters(/*recurse=*/true))
        observer_.AddParameter(JoinModulePath(m->root, p.name), p.value);
      for (const auto& b : m->module.named_buffers(/*recurse=*/true))
        observer_.AddParameter(JoinModulePath(m->root, b.name), b.value);
    }
  }

  const LatentGeometry& geometry() const override { return manifest_.latent; }
  c10::Device device() const override { return device_; }
  c10::ScalarType latent_dtype() const override { return observer_.policy().compute; }

  // x [B, C, T, h, w] and cond [B, L, D] in the compute dtype, t [B] float32.
  at::Tensor PredictNoise(const at::Tensor& x, const at::Tensor& t, const at::Tensor& cond) override {
    return Forward(denoiser_, {x, t, cond});
  }
  // z [B, C, T, h, w] -> [B, 3, F, H, W] (F frames: T, or more where the VAE upsamples in time).
  at::Tensor Decode(const at::Tensor& z) override {
    observer_.set_step(step_ = -1);
    return Forward(decoder_, {z});
  }
  void BeginStep(int step) override { observer_.set_step(step_ = step); }
  void SetObserver(ModuleObserver observer) override {
    watch_ = observer;
    observer_.set_observer(std::move(observer));
  }
  void SetMismatchLog(std::vector<DtypeMismatch>* log) override { observer_.set_mismatch_log(log); }
  std::vector<std::string> TakeIslandInputMakers() override { return observer_.TakeIslandInputMakers(); }
  double TakeLargestFp16Magnitude() override { return observer_.TakeLargestFp16Magnitude(); }
  std::string WeightsOutOfFp8Range() const override {
    std::string text;
    for (const InstrumentedModule* m : {&denoiser_, &decoder_}) {
      for (const std::string& weight : m->out_of_fp8_range) text += (text.empty() ? "" : ", ") + weight;
    }
    return text;
  }
  std::string CurrentModule() const override {
    return active_ ? active_->instrumentation->current_path() : "";
  }
  std::string CurrentOp() const override { return active_ ? active_->instrumentation->last_op() : ""; }
  std::string CurrentOpNote() const override {
    if (!active_) return "";
    if (active_->instrumentation->last_op_weight_is_constant()) {
      return "its weight is a tensor constant of " + active_->root +
             ".pt (torch.jit.freeze or a trace baked it in), which module.to(dtype) does not convert: "
             "cast the model before freezing or tracing it";
    }
    const std::string& origin = observer_.Float32OperandOrigin();
    if (origin.empty()) return "";
    return "its float32 operand became float32 at " + ModuleOfIslandEntry(origin) + " (" +
           OpOfIslandEntry(origin) + ")";
  }
  std::string CurrentFloat32Origin() const override { return observer_.Float32OperandOrigin(); }
  // Hands the modules over (the model is not used after).
  InstrumentedModule TakeDenoiser() { return std::move(denoiser_); }
  InstrumentedModule TakeDecoder() { return std::move(decoder_); }

  std::string ObservedSummary() const override {
    const std::string accumulation = observer_.accumulation().ObservedNote();
    std::string complex_cast;
    for (const InstrumentedModule* m : {&denoiser_, &decoder_}) {
      for (const std::string& name : m->complex_cast)
        complex_cast += (complex_cast.empty() ? "" : ", ") + name;
    }
    if (!complex_cast.empty()) {
      const DtypePolicy& policy = observer_.policy();
      complex_cast =
          "complex tensors cast to " +
          std::string(c10::toString(policy.emulate_fp16 ? at::kHalf : policy.compute)) +
          " as Python's Module.to(dtype) casts them, their imaginary parts dropped: " + complex_cast;
    }
    return "denoiser: " + denoiser_.instrumentation->coverage().Summary() +
           "; decoder: " + decoder_.instrumentation->coverage().Summary() +
           (accumulation.empty() ? "" : "; " + accumulation) +
           (complex_cast.empty() ? "" : "; " + complex_cast);
  }

 private:
  // One forward of `m` with the observer active; an exception leaves active_ set, so that
  // CurrentModule() names where it was raised.
  at::Tensor Forward(InstrumentedModule& m, const std::vector<at::Tensor>& inputs) {
    active_ = &m;
    m.instrumentation->ResetStack();
    const c10::NoGradGuard no_grad;  // parameters require grad (LoadInstrumented)
    const ScopedPlainGraphExecution plain;
    IslandObserver islands(observer_.policy(), observer_, watch_, step_);  // op_islands.h
    const GraphInstrumentation::ActiveScope scope(*m.instrumentation, ShadowOrSelf(islands, step_));
    observer_.BeginForward();
    std::vector<c10::IValue> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool timesteps = &m == &denoiser_ && i == 1;  // t stays float32 (the contract)
      args.emplace_back(observer_.EnterRoot(m.root, inputs[i], timesteps));
    }
    const at::Tensor out = islands.LeaveRoot(m.module.forward(args).toTensor());
    return observer_.LeaveRoot(m.root, out);
  }

  ModelManifest manifest_;
  InstrumentedModule denoiser_, decoder_;
  PackageObserver observer_;
  c10::Device device_;
  InstrumentedModule* active_ = nullptr;
  int step_ = 0;          // the sampler step running; -1: the decode
  ModuleObserver watch_;  // what SetObserver gave, for op islands (op_islands.h)
};

// Loads DIR/<root>.pt in float32 on the CPU and instruments its graphs (before any
// forward: the graph executor keeps the plan of a graph it ran).
StatusOr<InstrumentedModule> LoadInstrumented(const std::string& dir, const std::string& root,
                                              const DtypePolicy& policy) {
  const std::string path = dir + "/" + root + ".pt";
  if (!std::filesystem::exists(path)) return Status::NotFound(path + ": file is missing");
  try {
    torch::jit::Module module = torch::jit::load(path, c10::Device(c10::kCPU));
    module.eval();
    // Floating parameters and buffers only, as Python's Module.to(dtype): LibTorch's
    // Module::to(dtype) converts integer buffers too (a Swin relative-position index).
    // Every floating parameter is marked as one (requires_grad, as a module saved from
    // Python holds it unless the user turned it off): the shadow tells a parameter from an
    // activation by it (module_shadow.h), whatever the flag the package was saved with.
    // Forward runs without autograd.
    for (const auto& p : module.named_parameters(/*recurse=*/true)) {
      if (p.value.is_floating_point()) {
        p.value.set_data(p.value.to(at::kFloat));
        p.value.requires_grad_(true);
      }
    }
    for (const auto& b : module.named_buffers(/*recurse=*/true)) {
      if (b.value.is_floating_point()) b.value.set_data(b.value.to(at::kFloat));
    }
    std::unique_ptr<GraphInstrumentation> instrumentation = GraphInstrumentation::Instrument(
        module, root, policy.attention_backend.empty() ? SdpaKernel::kDecomposed : SdpaKernel::kKept);
    return InstrumentedModule{root, std::move(module), std::move(instrumentation), {}, {}};
  } catch (const std::exception& e) {
    return Status::Corrupt(path + ": not a loadable TorchScript module: " + ClassifyError(e.what()).message);
  }
}

// Whether a graph of `module`'s own methods (not its children's) calls a linear or a
// convolution (pipelines/weighted_ops.h: the ops whose weight is positional).
bool CallsALinearOrAConvolution(const torch::jit::Module& module) {
  const std::function<bool(const torch::jit::Block*)> calls = [&](const torch::jit::Block* block) {
    for (const torch::jit::Node* node : block->nodes()) {
      const WeightedOp* op = FindWeightedOp(node->kind().toQualString());
      if (op != nullptr && op->positional_weight) return true;
      for (const torch::jit::Block* nested : node->blocks()) {
        if (calls(nested)) return true;
      }
    }
    return false;
  };
  for (const torch::jit::Method& method : module.get_methods()) {
    if (calls(method.graph()->block())) return true;
  }
  return false;
}

// The `weight` parameters of the module's Linear and Conv layers, by parameter path: of
// every module whose own methods call a linear or a convolution (nn.Linear, nn.Conv3d, and
// their subclasses, which a scripted or traced type does not name: `isinstance` in
// torchao's and diffusers' FP8 storage counts them).
std::set<std::string> LinearAndConvWeights(const torch::jit::Module& module) {
  std::set<std::string> weights;
  for (const auto& sub : module.named_modules()) {
    if (!sub.value.hasattr("weight") || !sub.value.attr("weight").isTensor() ||
        !CallsALinearOrAConvolution(sub.value))
      continue;
    weights.insert(sub.name.empty() ? "weight" : sub.name + ".weight");
  }
  return weights;
}

// Places every parameter and floating buffer on `device` in the dtype the policy gives
// its module: float32 inside an fp32_modules island, else the compute dtype. FP8 storage
// rounds the weights (those of Linear and Conv layers only with
// DtypePolicy::fp8_linear_conv_only) through their 8-bit codes first (what a model stored in FP8 and
// upcast at use computes with); FP16 emulation rounds them through float16. A complex
// tensor outside the islands under a reduced policy becomes real, as Python's
// Module.to(dtype) makes it (a RoPE table registered as a complex buffer loses its sines).
void ApplyPolicy(InstrumentedModule& m, const DtypePolicy& policy, c10::Device device) {
  const std::optional<Fp8Format> fp8 = Fp8FormatOf(policy.storage);
  const bool reduced = policy.emulate_fp16 || policy.compute != at::kFloat;
  const std::set<std::string> linear_conv_weights = LinearAndConvWeights(m.module);
  auto place = [&](const std::string& name, at::Tensor value, bool is_weight) {
    const bool island = policy.KeepsWeightInFp32(JoinModulePath(m.root, name));
    const bool made_real = value.is_complex() && reduced && !island;
    if (!value.is_floating_point() && !made_real) {
      value.set_data(value.to(device));
      return;
    }
    if (made_real) m.complex_cast.push_back(m.root + "." + name);
    at::Tensor placed = made_real ? at::real(value).to(at::kFloat) : value.to(at::kFloat);
    if (fp8 && is_weight && !island && policy.StoresInFp8(linear_conv_weights.count(name) > 0)) {
      const double largest = Fp8MaxFinite(*fp8);
      const double absmax = placed.numel() > 0 ? placed.abs().max().item<double>() : 0.0;
      const double smallest_normal = Fp8MinNormal(*fp8);
      char text[320] = "";
      if (absmax > largest) {
        const int64_t count = (placed.abs() > largest).sum().item<int64_t>();
        std::snprintf(text, sizeof text, "%s.%s reaches %.4g (%.3g%% of its values beyond %g)",
                      m.root.c_str(), name.c_str(), absmax, 100.0 * count / placed.numel(), largest);
      } else if (absmax > 0 && absmax < smallest_normal) {
        // The whole tensor among the subnormals (e4m3: 3 bits at most) or flushed to zero.
        const at::Tensor stored =
            DecodeFp8Tensor(EncodeFp8Tensor(placed, *fp8), *fp8, at::kFloat, placed.device());
        const int64_t flushed = ((stored == 0) & (placed != 0)).sum().item<int64_t>();
        std::snprintf(
            text, sizeof text, "%s.%s reaches only %.3g, below %g (%.3g%% of its values flush to zero)",
            m.root.c_str(), name.c_str(), absmax, smallest_normal, 100.0 * flushed / placed.numel());
      }
      double scale = 1;  // fp8_scaled_to_fit: a power of two that brings the tensor into range
      if (text[0] != '\0') {
        m.out_of_fp8_range.push_back(text);
        if (policy.fp8_scaled_to_fit) scale = std::exp2(std::ceil(std::log2(absmax / largest)));
      }
      placed =
          DecodeFp8Tensor(EncodeFp8Tensor(placed / scale, *fp8), *fp8, at::kFloat, placed.device()) * scale;
    }
    if (policy.emulate_fp16 && !island) placed = placed.to(at::kHalf).to(at::kFloat);
    value.set_data(placed.to(device, island ? at::kFloat : policy.compute));
  };
  for (const auto& p : m.module.named_parameters(/*recurse=*/true)) place(p.name, p.value, true);
  for (const auto& b : m.module.named_buffers(/*recurse=*/true)) place(b.name, b.value, false);
}

// "shape [1, 4, 8, 8, 8] dtype Float", for contract errors.
std::string ShapeDtypeString(const at::Tensor& t) {
  return "shape " + ShapeString(t) + " dtype " + c10::toString(t.scalar_type());
}

// The contract (docs/architecture.md), checked on zeros in float32 on the CPU: a package that
// fails it is broken. What a policy does to a working package is a finding, not this.
Status CheckContract(const std::string& dir, TorchScriptModel& model, const LatentGeometry& g) {
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor x = at::zeros({1, g.channels, g.frames, g.height, g.width}, opts);
  const at::Tensor cond = at::zeros({1, g.cond_tokens, g.cond_dim}, opts);
  const at::Tensor t = at::full({1}, 999.0, opts);
  at::Tensor eps, frames;
  try {
    eps = model.PredictNoise(x, t, cond);
  } catch (const std::exception& e) {
    return Status::InvalidInput(dir + "/denoiser.pt: forward(x, t, cond) failed in float32: " +
                                ClassifyError(e.what(), model.CurrentModule()).Reason());
  }
  if (eps.sizes() != x.sizes() || eps.scalar_type() != at::kFloat) {
    return Status::InvalidInput(dir + "/denoiser.pt: output " + ShapeDtypeString(eps) +
                                " is not the input's " + ShapeDtypeString(x));
  }
  try {
    frames = model.Decode(x);
  } catch (const std::exception& e) {
    return Status::InvalidInput(dir + "/decoder.pt: forward(z) failed in float32: " +
                                ClassifyError(e.what(), model.CurrentModule()).Reason());
  }
  // Any number of frames: a causal video VAE upsamples in time (T latent frames to 4T+1).
  if (frames.dim() != 5 || frames.size(0) != 1 || frames.size(1) != 3 || frames.size(2) < 1 ||
      frames.scalar_type() != at::kFloat) {
    return Status::InvalidInput(dir + "/decoder.pt: output " + ShapeDtypeString(frames) +
                                " is not shape [1, 3, frames, H, W] dtype Float");
  }
  return Status::Ok();
}

// The limits of model.toml's numbers: steps and guidance the same as the CLI's and a
// matrix's (harness/number_limits.h); sizes that keep a latent and a conditioning tensor
// allocatable.
constexpr int64_t kMaxSamplerSteps = kStepsLimit.max;
constexpr double kMaxGuidance = kGuidanceLimit.max;
constexpr int64_t kMaxLatentDim = 4096;
constexpr int64_t kMaxCondDim = 65536;
constexpr int64_t kMaxTensorElements = int64_t{1} << 28;  // 1 GiB of float32

// One integer of model.toml: [section] key, from 1 to max.
struct ManifestInteger {
  const char* section;
  const char* key;
  int64_t max;
  int64_t* out;
};

// *integer.out, or InvalidInput "<path>:<line>:<col>: [section] key ..." (the file alone
// when the key is missing). Read as int64, as TOML writes it: never narrowed.
Status ReadInteger(const toml::table& table, const std::string& path, const ManifestInteger& integer) {
  const std::string what = std::string("[") + integer.section + "] " + integer.key +
                           " must be a positive integer, at most " + std::to_string(integer.max);
  const toml::node* node = table[integer.section][integer.key].node();
  if (node == nullptr) return Status::InvalidInput(path + ": " + what + " (missing)");
  const std::optional<int64_t> value = node->is_integer() ? node->value<int64_t>() : std::nullopt;
  if (!value || *value < 1 || *value > integer.max) {
    return Status::InvalidInput(TomlPlace(path, node->source()) + ": " + what +
                                (value ? ", not " + std::to_string(*value) : ""));
  }
  *integer.out = *value;
  return Status::Ok();
}

// Each of the latent [1, C, T, h, w] and the conditioning [1, L, D] at most
// kMaxTensorElements values (each factor is bounded, so the products do not overflow).
Status CheckTensorSizes(const toml::table& table, const std::string& path, const LatentGeometry& g) {
  if (g.channels * g.frames * g.height * g.width > kMaxTensorElements) {
    return Status::InvalidInput(TomlPlace(path, table["latent"].node()->source()) +
                                ": [latent] channels x frames x height x width is more than " +
                                std::to_string(kMaxTensorElements));
  }
  if (g.cond_tokens * g.cond_dim > kMaxTensorElements) {
    return Status::InvalidInput(TomlPlace(path, table["cond"].node()->source()) +
                                ": [cond] tokens x dim is more than " + std::to_string(kMaxTensorElements));
  }
  return Status::Ok();
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
  const auto name = table["name"].value<std::string>();
  if (!name) return Status::InvalidInput(path + ": missing key 'name' (a string)");
  const Status named = CheckName("pipeline name", *name);
  if (!named.ok()) return named.WithContext(TomlPlace(path, table["name"].node()->source()));
  m.name = *name;
  int64_t steps = 0;
  const ManifestInteger integers[] = {
      {"latent", "channels", kMaxLatentDim, &m.latent.channels},
      {"latent", "frames", kMaxLatentDim, &m.latent.frames},
      {"latent", "height", kMaxLatentDim, &m.latent.height},
      {"latent", "width", kMaxLatentDim, &m.latent.width},
      {"cond", "tokens", kMaxLatentDim, &m.latent.cond_tokens},
      {"cond", "dim", kMaxCondDim, &m.latent.cond_dim},
      {"sampler", "steps", kMaxSamplerSteps, &steps},
  };
  for (const ManifestInteger& integer : integers) FG_RETURN_IF_ERROR(ReadInteger(table, path, integer));
  FG_RETURN_IF_ERROR(CheckTensorSizes(table, path, m.latent));
  m.sampler.steps = static_cast<int>(steps);
  const auto kind = table["sampler"]["kind"].value<std::string>();
  const auto parsed = kind ? ParseSamplerKind(*kind) : std::nullopt;
  if (!parsed) return Status::InvalidInput(path + ": [sampler] kind must be \"ddim\" or \"euler\"");
  m.sampler.kind = *parsed;
  const toml::node* guidance = table["sampler"]["guidance"].node();
  const std::optional<double> value =
      guidance != nullptr && (guidance->is_floating_point() || guidance->is_integer())
          ? guidance->value<double>()
          : std::nullopt;
  if (!value || !(*value >= 1.0 && *value <= kMaxGuidance)) {  // NaN fails both
    const std::string where = guidance != nullptr ? TomlPlace(path, guidance->source()) : path;
    return Status::InvalidInput(where + ": [sampler] guidance must be a number from 1 to " +
                                std::to_string(static_cast<int>(kMaxGuidance)));
  }
  m.sampler.guidance = *value;
  return m;
}

StatusOr<std::unique_ptr<VideoModel>> LoadModelPackage(const std::string& dir, const DtypePolicy& policy,
                                                       c10::Device device) {
  StatusOr<ModelManifest> manifest = ReadModelManifest(dir);
  if (!manifest.ok()) return manifest.status();
  StatusOr<InstrumentedModule> denoiser = LoadInstrumented(dir, "denoiser", policy);
  if (!denoiser.ok()) return denoiser.status();
  StatusOr<InstrumentedModule> decoder = LoadInstrumented(dir, "decoder", policy);
  if (!decoder.ok()) return decoder.status();
  // The contract in float32 on the CPU first; then the policy and the device.
  TorchScriptModel fp32(*manifest, std::move(*denoiser), std::move(*decoder), Fp32Policy(),
                        c10::Device(c10::kCPU));
  {
    const ModuleShadow::Suspend no_shadow;  // the contract's forwards are not the run's
    FG_RETURN_IF_ERROR(CheckContract(dir, fp32, manifest->latent));
  }
  InstrumentedModule d = fp32.TakeDenoiser(), e = fp32.TakeDecoder();
  ApplyPolicy(d, policy, device);
  ApplyPolicy(e, policy, device);
  return std::unique_ptr<VideoModel>(
      std::make_unique<TorchScriptModel>(*manifest, std::move(d), std::move(e), policy, device));
}

StatusOr<std::vector<PackageTensor>> ListPackageTensors(const std::string& dir, const DtypePolicy& policy,
                                                        c10::Device device) {
  std::vector<PackageTensor> tensors;
  for (const char* root : {"denoiser", "decoder"}) {
    StatusOr<InstrumentedModule> m = LoadInstrumented(dir, root, policy);
    if (!m.ok()) return m.status();
    ApplyPolicy(*m, policy, device);
    for (const auto& p : m->module.named_parameters(/*recurse=*/true))
      tensors.push_back({std::string(root) + "." + p.name, p.value.scalar_type(), p.value.numel()});
    for (const auto& b : m->module.named_buffers(/*recurse=*/true))
      tensors.push_back({std::string(root) + "." + b.name, b.value.scalar_type(), b.value.numel()});
  }
  return tensors;
}

}  // namespace framegate
