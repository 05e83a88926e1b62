// PackageObserver: what framegate does at every submodule call and op of a user's
// TorchScript package (pipelines/graph_instrumentation.h), so that a package gets what the
// reference model gets:
//   - FP32 islands by module path (DtypePolicy::fp32_modules): at the boundary of an
//     island the inputs are cast to float32; its outputs go back to the compute dtype
//     where a consumer outside the islands takes them (IslandObserver, op_islands.h);
//   - FP16 emulation (DtypePolicy::emulate_fp16) by dtype propagation
//     (pipelines/dtype_propagation.h): an op output outside an island is rounded through
//     float16 (overflow to Inf, underflow to 0, 10-bit mantissa) exactly when a real FP16
//     run would hold it in FP16; values the model keeps in float32 (a sinusoid from
//     t.float() and arange) stay exact; what an in-place op writes (h += x) is rounded
//     in place. A weighted op whose input would be float32 and weight FP16 (or the
//     reverse), or a matrix product of two activations of two dtypes (float32 probs @
//     FP16 v), raises the dtype error a real run raises. Not emulated:
//     the accumulation order and width inside an op (matmul, conv, sums and softmax
//     accumulate in float32 as the CPU kernels do), and a dtype the model reads at run
//     time from a tensor it did not receive (x.dtype of a value built inside: float32
//     here, so the propagation falls back to FP16);
//   - accumulation emulation on the CPU (pipelines/accumulation_emulation.h): TF32 inputs
//     of the weighted ops (pipelines/weighted_ops.h: linear, the convolutions, matmul, mm,
//     bmm, addmm, baddbmm); a reduced-precision running sum for linear, matmul, mm and bmm
//     (recomputed from the op's inputs; addmm, baddbmm and einsum keep FP32
//     accumulation), outside FP32 islands;
//   - the dtype audit: every weighted op with a weight (a parameter or a linear's or a
//     convolution's weight operand) whose input dtype differs from the weight's, by
//     module path;
//   - the ModuleObserver (NaN localisation, probes, SQNR) sees every module output and
//     every op output, named by module path and op, but an uninitialised allocation's
//     (aten::empty and its kin: whatever memory it got, NaN included);
//   - with FP32 islands: which op made each value that enters an island from outside
//     (TakeIslandInputMakers), for the advisor.
// Not thread-safe; one per model.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipelines/accumulation_emulation.h"
#include "pipelines/dtype_policy.h"
#include "pipelines/dtype_propagation.h"
#include "pipelines/graph_instrumentation.h"
#include "pipelines/layers.h"
#include "pipelines/storage_map.h"

namespace framegate {

class PackageObserver : public GraphObserver {
 public:
  PackageObserver(DtypePolicy policy, bool on_cpu)
      : policy_(std::move(policy)),
        accumulation_(AccumulationOf(policy_, on_cpu)),
        track_makers_(!policy_.fp32_modules.empty()),
        track_float32_(policy_.emulate_fp16 || policy_.compute != at::kFloat) {}

  // The parameter or buffer at `weight_path` (after the policy placed it): its would-be
  // dtype for the FP16 emulation.
  void AddParameter(const std::string& weight_path, const at::Tensor& value);
  // A tensor that module.to(dtype) leaves as it is, so its would-be dtype is its own: a
  // plain tensor attribute (neither parameter nor buffer, e.g. `self.freqs = ...`) or a
  // graph's tensor constant (a trace's baked tensor, a frozen module's weight).
  void AddUnconverted(const at::Tensor& value);
  // Before each forward of a root module: forgets the last forward's values.
  void BeginForward() {
    would_be_.ClearActivations();
    makers_.clear();
    float32_origins_.clear();
    float32_origin_site_ = nullptr;
    // An op that raised in the last forward left its operands here.
    matmul_ = MatmulOperands{};
    widening_ = Widening{};
    einsum_ = EinsumCall{};
    pending_ = PendingOp{};
  }
  // The ops (as op island entries, "decoder.out_mix:aten::add") outside any island whose
  // outputs (or views or copies of them) entered an FP32 module island from a caller
  // outside it, or an op island's op (EnterIsland), first seen first, since the last
  // call; then forgets them. An island that takes its input rounded where it was made (an
  // offset added before a norm) needs that op in FP32 with it.
  std::vector<std::string> TakeIslandInputMakers() { return std::move(island_input_makers_); }
  // Under FP16 emulation: the largest finite |value| held in FP16 since the last call (the
  // cell's headroom check, runners/cell_runner.cc), once it is past half FP16's largest
  // (65504 / 2); 0 below that. Then forgets it.
  double TakeLargestFp16Magnitude() { return std::exchange(largest_fp16_magnitude_, 0.0); }
  // Where the float32 operand of the op running now (the one that raised, when a run
  // raised) became float32 under a reduced policy: the op outside the islands that made it
  // float32 from no float32 input (a `.to(torch.float32)`, `torch.zeros`, an arange cast
  // to the timestep's dtype) or first took it from a tensor no op made (a plain attribute,
  // a constant), as an op island entry ("denoiser:aten::to"); "" when it has none or that
  // is not known.
  const std::string& Float32OperandOrigin() const {
    static const std::string none;
    return float32_origin_site_ != nullptr ? float32_operand_origin_ : none;
  }

  void set_step(int step) { step_ = step; }
  void set_observer(ModuleObserver observer) { observer_ = std::move(observer); }
  void set_mismatch_log(std::vector<DtypeMismatch>* log) { mismatch_log_ = log; }
  const DtypePolicy& policy() const { return policy_; }
  const AccumulationEmulation& accumulation() const { return accumulation_; }

  at::Tensor Before(const std::string& path, const GraphSite& site, int input_index,
                    const at::Tensor& value) override;
  at::Tensor After(const std::string& path, const GraphSite& site, int output_index,
                   const at::Tensor& value) override;
  // Under FP16 emulation: the would-be dtype (RunDtypeOf); else the value's own.
  c10::ScalarType HeldDtype(const at::Tensor& value) const override { return RunDtypeOf(value); }
  void HoldLike(const at::Tensor& replacement, const at::Tensor& value) override;
  // Records the op that made `value` among the island input makers.
  void EnterIsland(const at::Tensor& value) override;

  // The casts at the boundary of a whole module ("denoiser", "decoder") when it is an
  // island itself: to float32 on the way in, back to the compute dtype on the way out.
  // `float32_input`: the contract keeps this input float32 (the denoiser's timesteps).
  at::Tensor EnterRoot(const std::string& root, const at::Tensor& value, bool float32_input);
  at::Tensor LeaveRoot(const std::string& root, const at::Tensor& value);

 private:
  // The dtype audit's half-seen op: the input's dtype waits for the weight's (for a
  // product of two activations, the first operand's for the second's).
  struct PendingOp {
    const GraphSite* site = nullptr;
    c10::ScalarType input = c10::ScalarType::Undefined;
    c10::ScalarType weight = c10::ScalarType::Undefined;
  };
  // A norm's input and its affine weight (group_norm, layer_norm, batch_norm,
  // instance_norm), under the emulation: a float32 input to an FP16 weight raises what a
  // real run raises (CPU and CUDA; an FP16 input to a float32 weight is CUDA's mixed-type
  // path, allowed).
  void AuditNormDtypes(const std::string& path, const GraphSite& site, int input_index,
                       c10::ScalarType dtype);
  // One operand of a weighted op, or of a product of two activations under the emulation,
  // with its run dtype: once both are seen, two dtypes raise what a real run raises (and
  // a weighted op's go to the dtype audit's log).
  void AuditOperandDtypes(const std::string& path, const GraphSite& site, int input_index,
                          c10::ScalarType dtype);
  // An op that does not promote (pipelines/same_dtype_ops.h: lerp, index_add, scatter,
  // index_put, grid_sampler...), under the emulation: an operand whose dtype is not input
  // 0's raises what a real run raises. An in-place op's input 0 is seen as its result
  // (AuditInPlaceSameDtype, from After).
  void AuditSameDtypeOperands(const std::string& path, const GraphSite& site, int input_index,
                              c10::ScalarType dtype);
  void AuditInPlaceSameDtype(const std::string& path, const GraphSite& site, c10::ScalarType written);
  [[noreturn]] void RaiseSameDtypeError(const std::string& path, const GraphSite& site, c10::ScalarType first,
                                        c10::ScalarType second);
  // The dtype `value` has in the run this one stands for: its would-be dtype under FP16
  // emulation, else its own.
  c10::ScalarType RunDtypeOf(const at::Tensor& value) const;
  // Under FP16 emulation: `out` as the value a real run holds after a node whose output
  // would be `dtype` (rounded through FP16, or a copy kept exact), recorded as that.
  at::Tensor Emulate(const at::Tensor& out, c10::ScalarType dtype, bool conversion);
  // Notes the largest finite |value| of `rounded` (held in FP16) while none past half
  // FP16's largest has been seen (one reduction per op output until then).
  void NoteFp16Magnitude(const at::Tensor& rounded);

  // The operands of the matmul-like op that is running, for its emulated recomputation.
  struct MatmulOperands {
    const GraphSite* site = nullptr;
    at::Tensor operands[3];
  };
  at::Tensor EmulateAccumulation(const std::string& path, const GraphSite& site, const at::Tensor& value);

  // The matmul-like op whose operands are widened to FP32 (accumulation_.widened): set
  // when its first operand of the widened dtype arrives, its output rounded back after.
  struct Widening {
    const GraphSite* site = nullptr;
    bool widened = false;  // an operand was cast to float32
    bool other = false;    // an operand of another dtype came first: the op keeps its error
  };
  at::Tensor Widen(const GraphSite& site, int input_index, const at::Tensor& value);

  // aten::einsum's operands come as a list, hooked in order where it is built: operands
  // of two (run) dtypes raise what the real op raises (audited like a weighted op's), and
  // BF16 ones are widened like a matmul's. `first`: the dtype of the call's first operand.
  struct EinsumCall {
    const GraphSite* site = nullptr;
    c10::ScalarType first = c10::ScalarType::Undefined;
  };
  at::Tensor EinsumOperand(const std::string& path, const GraphSite& site, const at::Tensor& value);

  DtypePolicy policy_;
  AccumulationEmulation accumulation_;
  MatmulOperands matmul_;
  Widening widening_;
  EinsumCall einsum_;
  int step_ = 0;
  ModuleObserver observer_;
  std::vector<DtypeMismatch>* mismatch_log_ = nullptr;
  PendingOp pending_;
  DtypePropagation would_be_;  // used under emulate_fp16 only

  // The op that made a storage's value (an op island entry). Kept when the policy has
  // islands.
  std::string MakerOf(const at::Tensor& value) const;
  bool track_makers_;
  StorageMap<std::string> makers_;
  std::string copy_maker_;  // the maker of the running copying view's input
  std::vector<std::string> island_input_makers_;
  double largest_fp16_magnitude_ = 0;  // TakeLargestFp16Magnitude

  // Where each float32 value of a reduced-precision run became float32 ("denoiser:aten::to"),
  // for Float32OperandOrigin: noted per op input, kept per op output.
  void NoteFloat32Operand(const GraphSite& site, int input_index, const at::Tensor& value);
  void KeepFloat32Origin(const std::string& path, const GraphSite& site, const at::Tensor& out);
  bool track_float32_;
  StorageMap<std::string> float32_origins_;
  const GraphSite* float32_origin_site_ = nullptr;  // the op whose operands were noted
  std::string float32_operand_origin_;              // its first float32 operand's origin
  std::string copy_float32_origin_;                 // of the running copying view's input
};

// "denoiser.blocks.1" + "ff" -> "denoiser.blocks.1.ff"; "" callee -> path.
std::string JoinModulePath(const std::string& path, const std::string& callee);

}  // namespace framegate
