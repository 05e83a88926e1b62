#include "pipelines/dtype_propagation.h"

#include "pipelines/dtype_policy.h"

namespace framegate {
namespace {

c10::ScalarType Promote(c10::ScalarType a, c10::ScalarType b) {
  if (a == c10::ScalarType::Undefined) return b;
  if (b == c10::ScalarType::Undefined) return a;
  return c10::promoteTypes(a, b);
}

// The ops that join a list of tensors. A list built by append (a loop over frames, a
// UNet's skip list) reaches them with its elements unhooked (graph_instrumentation.h hooks
// a prim::ListConstruct's only): values nobody produced in view.
bool JoinsATensorList(const std::string& op) {
  return op == "aten::cat" || op == "aten::concat" || op == "aten::concatenate" || op == "aten::stack" ||
         op == "aten::hstack" || op == "aten::vstack" || op == "aten::dstack";
}

// x.type_as(other) and x.to(other): input 1 is the tensor whose dtype they take.
bool IsConversionTarget(const GraphSite& site, int input_index) {
  return input_index == 1 && (site.op == "aten::type_as" || site.op == "aten::to");
}

}  // namespace

void DtypePropagation::SetParameter(const at::Tensor& value, c10::ScalarType dtype) {
  parameters_.Put(value, dtype);
}

void DtypePropagation::Set(const at::Tensor& value, c10::ScalarType dtype) { activations_.Put(value, dtype); }

c10::ScalarType DtypePropagation::Lookup(const at::Tensor& value) const {
  for (const StorageMap<c10::ScalarType>* entries : {&parameters_, &activations_}) {
    if (const c10::ScalarType* dtype = entries->Find(value)) return *dtype;
  }
  return c10::ScalarType::Undefined;
}

c10::ScalarType DtypePropagation::Of(const at::Tensor& value) const {
  return value.defined() ? Lookup(value) : c10::ScalarType::Undefined;
}

void DtypePropagation::AddInput(const GraphSite& site, int input_index, const at::Tensor& value) {
  PendingOp& op = pending_[&site];
  if (op.output_seen) op = PendingOp{};  // the node runs again
  if (!value.defined() || !value.is_floating_point()) return;
  c10::ScalarType dtype = Lookup(value);
  if (dtype == c10::ScalarType::Undefined) dtype = reduced_;  // e.g. an unhooked copy
  if (input_index == kDtypeSourceInput) {
    op.dtype_source = dtype;
  } else if (IsConversionTarget(site, input_index)) {
    op.conversion_target = dtype;
  } else if (value.dim() > 0) {
    op.dimensioned = Promote(op.dimensioned, dtype);
  } else {
    op.zero_dim = Promote(op.zero_dim, dtype);
  }
}

c10::ScalarType DtypePropagation::OutputDtype(const GraphSite& site, c10::ScalarType actual) {
  PendingOp& op = pending_[&site];
  op.output_seen = true;
  switch (site.dtype_argument) {
    case GraphSite::DtypeArgument::kConstant:
      return site.dtype_constant;
    case GraphSite::DtypeArgument::kWritten:  // read from a tensor when its branch ran
      return op.dtype_source != c10::ScalarType::Undefined ? op.dtype_source : actual;
    case GraphSite::DtypeArgument::kDynamic:
      return reduced_;
    case GraphSite::DtypeArgument::kNone:
      break;
  }
  if (op.conversion_target != c10::ScalarType::Undefined) return op.conversion_target;
  if (op.dimensioned != c10::ScalarType::Undefined) return op.dimensioned;
  if (op.zero_dim != c10::ScalarType::Undefined) return op.zero_dim;
  if (JoinsATensorList(site.op)) return reduced_;  // its elements unseen: the reduced dtype
  return c10::kFloat;                              // no floating input: a factory, in the default dtype
}

std::string EmulatedDtypeErrorText(const std::string& op, c10::ScalarType input, c10::ScalarType weight) {
  const std::string why = std::string(" (FP16 emulation: a real FP16 run raises this; input ") +
                          DtypeName(input) + ", weight " + DtypeName(weight) + ")";
  if (op.empty()) return "Expected the input and the weight to have the same dtype" + why;
  if (op.find("conv") != std::string::npos) {
    return std::string("Input type (") + DtypeName(input) + ") and weight type (" + DtypeName(weight) +
           ") should be the same" + why;
  }
  return "mat1 and mat2 must have the same dtype" + why;
}

std::string EmulatedOperandsDtypeErrorText(c10::ScalarType first, c10::ScalarType second) {
  return std::string("expected scalar type ") + c10::toString(first) + " but found " + c10::toString(second) +
         " (FP16 emulation: a real FP16 run raises this; operands " + DtypeName(first) + " and " +
         DtypeName(second) + ")";
}

}  // namespace framegate
