#include "pipelines/dtype_audit.h"

#include <ATen/Functions.h>

#include "pipelines/model_package.h"
#include "pipelines/reference_model.h"

namespace framegate {
namespace {

// One traced step and one decode: the denoiser on the seed's inputs at the first
// timestep, then the decoder on the seed's noise as latents (after a denoiser that raised
// too); every module (and, in a package, every op with a weight) whose input dtype
// differs from its weight's. step_error is the first that raised.
void TraceOneStep(VideoModel& model, DtypeAudit* audit) {
  audit->traced = true;
  model.SetMismatchLog(&audit->inputs);
  const GenerationInputs in = DrawInputs(model.geometry(), 0);
  const auto opts = at::TensorOptions().dtype(model.latent_dtype()).device(model.device());
  try {
    model.BeginStep(0);
    model.PredictNoise(in.noise.to(opts), at::full({1}, 999.0, at::TensorOptions().device(model.device())),
                       in.cond.to(opts));
  } catch (const std::exception& e) {
    audit->step_error = ClassifyModelError(e.what(), model);
  }
  try {
    model.BeginStep(-1);
    model.Decode(in.noise.to(opts));
  } catch (const std::exception& e) {
    if (!audit->step_error) audit->step_error = ClassifyModelError(e.what(), model);
  }
  model.SetMismatchLog(nullptr);
}

DtypeAudit AuditReference(ReferenceModel& model, const DtypePolicy& policy) {
  DtypeAudit audit;
  const DtypePolicy decoder_policy = DecoderPolicyOf(policy);
  for (const WeightEntry& w : model.weights().entries()) {
    const DtypePolicy& p = IsDecoderWeight(w.name) ? decoder_policy : policy;
    // The reference model's weights of 2 or more dimensions are its Linear and Conv weights.
    const c10::ScalarType expected =
        ExpectedStoredDtype(p, w.kind, ModuleOfWeight(w.name), /*linear_or_conv_weight=*/w.master.dim() >= 2);
    if (w.stored.scalar_type() != expected)
      audit.weights.push_back({w.name, DtypeName(expected), DtypeName(w.stored.scalar_type())});
  }
  TraceOneStep(model, &audit);
  return audit;
}

}  // namespace

c10::ScalarType ExpectedStoredDtype(const DtypePolicy& policy, ModuleKind kind, const std::string& module,
                                    bool linear_or_conv_weight) {
  if (policy.IsIsland(kind, module)) return c10::kFloat;
  switch (policy.storage) {
    case WeightStorage::kFloat64:
      return c10::kDouble;
    case WeightStorage::kFloat32:
      return c10::kFloat;
    case WeightStorage::kBFloat16:
      return c10::kBFloat16;
    case WeightStorage::kFloat16:
      return c10::kHalf;
    case WeightStorage::kFp8E4M3:
    case WeightStorage::kFp8E5M2:
      return policy.StoresInFp8(linear_or_conv_weight) ? c10::kByte : policy.compute;
  }
  return c10::kFloat;
}

StatusOr<DtypeAudit> AuditDtypes(const PipelineSpec& spec) {
  StatusOr<c10::Device> device = ParseDevice(spec.device);
  if (!device.ok()) return device.status();
  if (!spec.model_dir.empty()) {
    StatusOr<std::vector<PackageTensor>> tensors = ListPackageTensors(spec.model_dir, spec.policy, *device);
    if (!tensors.ok()) return tensors.status();
    DtypeAudit audit;
    for (const PackageTensor& t : *tensors) {
      const c10::ScalarType expected =
          spec.policy.KeepsWeightInFp32(t.name) ? c10::kFloat : spec.policy.compute;
      if (c10::isFloatingType(t.dtype) && t.dtype != expected)
        audit.weights.push_back({t.name, DtypeName(expected), DtypeName(t.dtype)});
    }
    StatusOr<std::unique_ptr<VideoModel>> model = LoadModelPackage(spec.model_dir, spec.policy, *device);
    if (!model.ok()) return model.status();
    TraceOneStep(**model, &audit);
    audit.observed = (*model)->ObservedSummary();
    return audit;
  }
  StatusOr<ReferenceSize> size = FindReferenceSize(spec.size);
  if (!size.ok()) return size.status();
  StatusOr<std::unique_ptr<ReferenceModel>> model =
      ReferenceModel::Create(*size, spec.policy, *device, spec.weight_seed, spec.fault);
  if (!model.ok()) return model.status();
  return AuditReference(**model, spec.policy);
}

}  // namespace framegate
