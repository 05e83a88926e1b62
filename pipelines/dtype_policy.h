// A dtype policy: not one dtype but how weights are stored, what the modules compute in,
// which modules stay FP32 ("islands") and the accumulation flags. Presets and their TOML
// form live in pipelines/policies.toml (see dtype_policy.cc).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "harness/status.h"

namespace framegate {

// What a module is, for FP32 islands and for reports.
enum class ModuleKind { kNorm, kSoftmax, kTimeEmbed, kDecoder, kAttentionLogits, kOther };
const char* ModuleKindName(ModuleKind kind);

// How weights are held in memory. kFp8* are 8-bit codes (uint8) decoded at use.
enum class WeightStorage { kFloat32, kBFloat16, kFloat16, kFp8E4M3, kFp8E5M2, kFloat64 };
const char* WeightStorageName(WeightStorage storage);
int64_t WeightStorageBytes(WeightStorage storage);  // bytes per element

struct DtypePolicy {
  std::string name = "fp32";
  WeightStorage storage = WeightStorage::kFloat32;
  c10::ScalarType compute = c10::kFloat;  // activations and non-island modules
  std::set<ModuleKind> fp32_islands;      // modules computed (and stored) in FP32, by kind
  // Modules kept in FP32 by path: globs (fnmatch, `*` spans dots) over module paths,
  // "denoiser.blocks.*.ff" for a package, "blocks.*.ff" or "decoder" for the reference
  // model. A module is inside an island when its path or an ancestor's matches. Its
  // weights stay FP32, its inputs are cast to FP32 and its outputs back at the boundary.
  // An entry that is a weight's whole path ("decoder.sigma") keeps that weight stored in
  // FP32 (KeepsWeightInFp32); an op island entry "PATH:OP", pipelines/op_islands.h.
  std::vector<std::string> fp32_modules;
  // The preset a policy defined in a file starts from (`based_on`); its tolerance
  // profile judges the policy. "" for a preset.
  std::string based_on;
  // The tolerance profile named by the policy's `tolerance` key (checks/tolerances.toml);
  // "" when it names none (see ToleranceProfileName).
  std::string tolerance;
  // FP32 compute standing for a real FP16 run: every value that run would hold in FP16
  // is rounded through FP16 (so that FP16 overflow and underflow show on a CPU that has
  // no FP16 kernels), values it would keep in float32 stay exact, and a weighted op whose
  // operands would differ in dtype raises its dtype error (pipelines/dtype_propagation.h).
  bool emulate_fp16 = false;
  // FP8 storage of the weights of Linear and Conv layers only (`fp8_weights =
  // "linear-conv"`): every other parameter (a bias, a norm's weight, an embedding table, a
  // LayerScale gamma, a modulation table) is stored in the compute dtype, as torchao's
  // float8 weight-only (Linear), diffusers' layerwise casting (Linear, Conv) and FP8
  // checkpoints that keep such tensors in BF16 do. false (`"all"`): every floating
  // parameter is stored in FP8.
  bool fp8_linear_conv_only = false;
  bool allow_tf32 = false;  // TF32 matmul/conv inputs (native on CUDA, emulated on the CPU)
  // Accumulation: on CUDA the real switches; on the CPU emulated
  // (pipelines/accumulation_emulation.h): FP16 / BF16 running sums in blocks.
  bool fp16_reduced_precision_reduction = false;
  bool bf16_reduced_precision_reduction = false;
  int64_t accumulation_block = 8;  // products per block of a reduced-precision sum
  // The scaled-dot-product attention kernels allowed on CUDA: "flash", "mem_efficient",
  // "math", "cudnn"; "" for LibTorch's choice. The CPU build has only "math": any other
  // is UNSUPPORTED there.
  std::string attention_backend;
  std::string fallback;  // the next safer policy ("" for none)
  // Internal (no file sets it; the policy's name says it): FP8 storage scales each weight
  // tensor that would saturate, or lies wholly below the format's smallest normal, by the
  // power of two that brings it into range, and back: the same weights without the
  // saturation or the flush, the reference of the range check (cell_runner).
  bool fp8_scaled_to_fit = false;
  // Internal (no file sets it; the advisor's margin check): a package's FP16 emulation
  // overflows this many doublings below FP16's largest value (65504 / 2^bits), its
  // rounding otherwise the same. 0: at 65504.
  int fp16_headroom_bits = 0;

  bool IsIsland(ModuleKind kind) const { return fp32_islands.count(kind) > 0; }
  // Whether module `path` (or one of its ancestors) matches an fp32_modules glob.
  bool InFp32Module(const std::string& path) const;
  // Whether the weight (parameter or buffer) at `weight_path` ("denoiser.blocks.0.ff.0.weight")
  // is stored in FP32: its module is inside an island, or an fp32_modules entry is its path.
  bool KeepsWeightInFp32(const std::string& weight_path) const;
  // Whether a parameter (outside the islands) is stored in FP8: FP8 storage, and with
  // fp8_linear_conv_only the weight of a Linear or Conv layer.
  bool StoresInFp8(bool linear_or_conv_weight) const;
  // An FP32 island by kind or by path.
  bool IsIsland(ModuleKind kind, const std::string& path) const {
    return IsIsland(kind) || InFp32Module(path);
  }
  // The dtype module `kind` at `path` computes in under this policy.
  c10::ScalarType ComputeDtypeFor(ModuleKind kind, const std::string& path = "") const {
    return IsIsland(kind, path) ? c10::kFloat : compute;
  }
  // The tolerance profile that judges this policy, the one place that decides it: the
  // `tolerance` key; else based_on's preset; else a preset's own name; else the preset
  // whose storage, compute, emulation and accumulation flags this policy has (islands
  // and fp32_modules do not count; storage finer than compute counts as the compute
  // dtype, compute finer than storage as the storage's preset). "" when none is implied
  // (a file's policy is refused at parse time then).
  std::string ToleranceProfileName() const;
  // This policy as a [policy.NAME] TOML table (the form ParsePolicies reads).
  std::string ToToml() const;
};

// Policies sorted by name. Parsed from TOML text ([policy.NAME] tables, see
// pipelines/policies.toml); errors name `source`, the line/column or policy, and the problem.
using PolicySet = std::vector<DtypePolicy>;
StatusOr<PolicySet> ParsePolicies(const std::string& toml_text, const std::string& source);
// The shipped presets (pipelines/policies.toml, compiled in).
const PolicySet& PresetPolicies();
// A preset by name; InvalidInput listing the known names otherwise.
StatusOr<DtypePolicy> FindPolicy(const std::string& name, const PolicySet& set = PresetPolicies());
// The presets plus the [policy.NAME] tables of a TOML text (a matrix or a policy file;
// other keys are not read; no table is fine). A table may start from a preset with
// based_on = "NAME". Redefining a preset is an error. Errors name `source` and the place.
// Policy names follow harness/name_rules.h, and no chain of fallbacks is a cycle (both
// errors name the file:line:col of the [policy.NAME] key, of the `fallback` key).
StatusOr<PolicySet> PresetsAndPoliciesOf(const std::string& toml_text, const std::string& source);
// The same for a file, read now; NotFound / InvalidInput naming `path`.
StatusOr<PolicySet> PresetsAndPoliciesOfFile(const std::string& path);
// PresetsAndPoliciesOfFile, parsed once per process: the first call for a `path` reads
// it, later calls (and their errors) come from memory, so a file that changes or
// vanishes while a run goes on does not change its cells' policies. Thread-safe.
StatusOr<PolicySet> PoliciesOfFile(const std::string& path);
// Makes `set` what PoliciesOfFile(path) returns from now on: the matrix parse hands over
// the policies it read from the matrix text that its cells name as their policy file.
void RememberPoliciesOfFile(const std::string& path, const PolicySet& set);
// `name` from the presets, or from PoliciesOfFile(policy_file) when one is given ("" for
// none). Reads each file once per process.
StatusOr<DtypePolicy> FindPolicyIn(const std::string& name, const std::string& policy_file);
// The module path of a weight: its name without the last component
// ("blocks.0.ff.0.weight" -> "blocks.0.ff.0").
std::string ModuleOfWeight(const std::string& weight_name);
// Bytes of the weights of `num_parameters` stored under the policy (islands ignored).
int64_t WeightBytes(const DtypePolicy& policy, int64_t num_parameters);
const char* DtypeName(c10::ScalarType dtype);  // "fp32", "bf16", "fp16", "uint8", ...

// The plain FP32 policy (the golden reference).
DtypePolicy Fp32Policy();
// FP64 weights and compute, no islands: the reference the golden's own error is measured
// against (`--fp64-ref`). Not a preset: it judges, it is not judged.
DtypePolicy Fp64ReferencePolicy();
// The policy the decoder runs under: FP32 when the policy keeps the decoder as an FP32
// island, else the policy itself. Decoder weights are those named "decoder.*".
DtypePolicy DecoderPolicyOf(const DtypePolicy& policy);
bool IsDecoderWeight(const std::string& name);

}  // namespace framegate
