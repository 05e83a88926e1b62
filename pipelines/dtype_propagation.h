// DtypePropagation: the dtype every value of a forward WOULD hold in a real run of a
// reduced-precision policy that framegate emulates in float32 (fp16-emulated: a real run
// holds FP16 parameters and activations, and float32 where the model asks for it).
//
// Values are known by their storage, so a view (x.view, x[:, None], x.transpose) shares
// its base's dtype, as in a real run. A copy made by an op that is not hooked (reshape of
// a non-contiguous tensor) is not known: it is taken to be in the reduced dtype. The rules, PyTorch's:
//   - parameters and buffers: the reduced dtype, float32 inside an FP32 island; a module's
//     plain tensor attribute or a graph's tensor constant (module.to(dtype) leaves
//     both): its own dtype;
//   - an op with a `dtype` argument: that dtype (a constant such as t.float() or
//     arange(dtype=float32), a module attribute, either chosen by an if), or the would-be
//     dtype of the tensor it is read from (x.to(like.dtype)); one from elsewhere (a
//     method's argument) is taken to be the reduced dtype; x.type_as(like) and x.to(like)
//     take like's;
//   - any other op: its floating inputs' promotion (c10::promoteTypes), where tensors
//     with dimensions outrank 0-dim ones (fp16 x * a 0-dim float32 tensor stays fp16);
//     a factory with no tensor input gets the default dtype, float32;
//   - a value nobody produced in view: the reduced dtype.
// Not thread-safe; one per model.
#pragma once

#include <string>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include "pipelines/graph_instrumentation.h"
#include "pipelines/storage_map.h"

namespace framegate {

class DtypePropagation {
 public:
  explicit DtypePropagation(c10::ScalarType reduced = c10::kHalf) : reduced_(reduced) {}

  c10::ScalarType reduced() const { return reduced_; }

  // A parameter's or buffer's would-be dtype; kept across forwards.
  void SetParameter(const at::Tensor& value, c10::ScalarType dtype);
  // An activation's would-be dtype (a root input, an op's output, an island's boundary).
  void Set(const at::Tensor& value, c10::ScalarType dtype);
  // The would-be dtype of `value`; Undefined when nobody set it.
  c10::ScalarType Of(const at::Tensor& value) const;
  // Forgets the activations (before each forward); parameters stay.
  void ClearActivations() {
    activations_.clear();
    pending_.clear();
  }

  // One input of `site` (its own inputs, list elements, the dtype source) before it runs.
  void AddInput(const GraphSite& site, int input_index, const at::Tensor& value);
  // The would-be dtype of `site`'s outputs, from the inputs added since the node last
  // ran (each output of one run gets the same answer); `actual`: the output's own dtype
  // (a dtype argument written in the model and read from no tensor is that).
  c10::ScalarType OutputDtype(const GraphSite& site, c10::ScalarType actual);

 private:
  struct PendingOp {
    c10::ScalarType dimensioned = c10::ScalarType::Undefined;  // promotion of inputs with dims
    c10::ScalarType zero_dim = c10::ScalarType::Undefined;     // ... of 0-dim inputs
    c10::ScalarType dtype_source = c10::ScalarType::Undefined;
    c10::ScalarType conversion_target = c10::ScalarType::Undefined;  // type_as / to(other)
    bool output_seen = false;
  };
  c10::ScalarType Lookup(const at::Tensor& value) const;

  c10::ScalarType reduced_;
  StorageMap<c10::ScalarType> parameters_;  // a storage's would-be dtype
  StorageMap<c10::ScalarType> activations_;
  std::unordered_map<const GraphSite*, PendingOp> pending_;
};

// The text a real run raises for a weighted op whose operands' dtypes differ, for an
// emulation that knows a real run would raise it (the wording ClassifyError files under
// dtype_mismatch) for `op` ("aten::linear", "aten::conv3d"; "" when not known), e.g.
// "mat1 and mat2 must have the same dtype (FP16 emulation: ...)".
std::string EmulatedDtypeErrorText(const std::string& op, c10::ScalarType input, c10::ScalarType weight);
// The same for a product of two operands neither of which is a weight (einsum, probs @ v):
// "expected scalar type Float but found Half (FP16 emulation: ...)".
std::string EmulatedOperandsDtypeErrorText(c10::ScalarType first, c10::ScalarType second);

}  // namespace framegate
