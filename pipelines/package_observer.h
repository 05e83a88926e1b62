// PackageObserver: what framegate does at every submodule call and op of a user's
// TorchScript package (pipelines/graph_instrumentation.h), so that a package gets what the
// reference model gets:
//   - FP32 islands by module path (DtypePolicy::fp32_modules): at the boundary of an
//     island the inputs are cast to float32 and the outputs back to the compute dtype;
//   - FP16 emulation (DtypePolicy::emulate_fp16): every float32 op output outside an
//     island is rounded through float16 (overflow to Inf, underflow to 0, 10-bit mantissa).
//     Not emulated: the accumulation order and width inside an op (matmul, conv, sums and
//     softmax accumulate in float32 as the CPU kernels do);
//   - accumulation emulation on the CPU (pipelines/accumulation_emulation.h): TF32 inputs
//     of linear, matmul, mm, bmm and the convolutions; a reduced-precision running sum for
//     linear, matmul, mm and bmm (recomputed from the op's inputs; other ops, such as
//     addmm, baddbmm and einsum, keep FP32 accumulation), outside FP32 islands;
//   - the dtype audit: every op with a weight (linear, conv, matmul with a parameter)
//     whose input dtype differs from the weight's, by module path;
//   - the ModuleObserver (NaN localisation, probes, SQNR) sees every module output and
//     every op output, named by module path and op.
// Not thread-safe; one per model.
#pragma once

#include <string>
#include <vector>

#include "pipelines/accumulation_emulation.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/graph_instrumentation.h"
#include "pipelines/layers.h"

namespace framegate {

class PackageObserver : public GraphObserver {
 public:
  PackageObserver(DtypePolicy policy, bool on_cpu)
      : policy_(std::move(policy)), accumulation_(AccumulationOf(policy_, on_cpu)) {}

  void set_step(int step) { step_ = step; }
  void set_observer(ModuleObserver observer) { observer_ = std::move(observer); }
  void set_mismatch_log(std::vector<DtypeMismatch>* log) { mismatch_log_ = log; }
  const DtypePolicy& policy() const { return policy_; }
  const AccumulationEmulation& accumulation() const { return accumulation_; }

  at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                    const at::Tensor& value) override;
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override;

  // The casts at the boundary of a whole module ("denoiser", "decoder") when it is an
  // island itself: to float32 on the way in, back to the compute dtype on the way out.
  at::Tensor EnterRoot(const std::string& root, const at::Tensor& value) const;
  at::Tensor LeaveRoot(const std::string& root, const at::Tensor& value) const;

 private:
  // The dtype audit's half-seen weighted op: the input's dtype waits for the weight's.
  struct PendingOp {
    const GraphSite* site = nullptr;
    c10::ScalarType input = c10::ScalarType::Undefined;
    c10::ScalarType weight = c10::ScalarType::Undefined;
  };
  void AuditWeightedOp(const std::string& path, const GraphSite& site, int input_index,
                       const at::Tensor& value);

  // The operands of the matmul-like op that is running, for its emulated recomputation.
  struct MatmulOperands {
    const GraphSite* site = nullptr;
    at::Tensor operands[3];
  };
  at::Tensor EmulateAccumulation(const std::string& path, const GraphSite& site, const at::Tensor& value);

  DtypePolicy policy_;
  AccumulationEmulation accumulation_;
  MatmulOperands matmul_;
  int step_ = 0;
  ModuleObserver observer_;
  std::vector<DtypeMismatch>* mismatch_log_ = nullptr;
  PendingOp pending_;
};

// "denoiser.blocks.1" + "ff" -> "denoiser.blocks.1.ff"; "" callee -> path.
std::string JoinModulePath(const std::string& path, const std::string& callee);

}  // namespace framegate
