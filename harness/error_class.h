// The one place that maps an exception from a pipeline (c10::Error text) to a failure
// class. Order matters: the first rule that matches wins.
//   dtype_mismatch  "mat1 and mat2 must have the same dtype", "Input type (...) and weight
//                   type (...) should be the same", "expected scalar type X but found Y";
//                   LibTorch 2.x's "expected m1 and m2 to have the same dtype, but got:
//                   ...", "Expected query, key, and value to have the same dtype", "Input
//                   type (float) and bias type (c10::BFloat16) should be the same"; and
//                   the ops that do not promote: "expected dtype c10::Half for `weight`
//                   but got dtype float" (lerp), "self (Half) and source (Float) must
//                   have the same scalar type" (index_add), "Expected self.dtype to be
//                   equal to src.dtype" (scatter), "...dtypes match" (index_put)
//   fp8_promotion   "Promotion for Float8 Types is not supported"
//   unsupported_op  "\"addmm_impl_cpu_\" not implemented for 'Half'", "no kernel", ...
//   out_of_memory   "out of memory", "can't allocate memory", "bad_alloc"
//   value_overflow  "value cannot be converted to type at::Half without overflow": a
//                   constant the model writes does not fit the dtype (masked_fill(-1e9)
//                   in FP16); the op in FP32 takes it
//   other           anything else
// and one class no exception gives: shape_mismatch, a cell whose frames or latents have
// another shape than its golden while the same model in FP32 has the golden's
// (runners/cell_runner.cc).
#pragma once

#include <string>

namespace framegate {

enum class ErrorClass {
  kDtypeMismatch,
  kFp8Promotion,
  kUnsupportedOp,
  kOutOfMemory,
  kValueOverflow,
  kShapeMismatch,
  kOther
};
const char* ErrorClassName(ErrorClass cls);  // "dtype_mismatch", ...

struct ClassifiedError {
  ErrorClass cls = ErrorClass::kOther;
  std::string message;   // the first line of the real message
  std::string module;    // where it happened, when known ("time_embed.0", "denoiser.pt:12")
  std::string op;        // the missing operator for unsupported_op ("addmm_impl_cpu_")
  std::string graph_op;  // the op node it was raised in, when ops are watched ("aten::linear")
  // What the model knows about that op that explains the error, when it does ("its weight
  // is a tensor constant of the graph ...": VideoModel::CurrentOpNote).
  std::string note;
  // A dtype_mismatch's float32 operand: where it became float32, as an op island entry
  // ("denoiser.embed:aten::to"; VideoModel::CurrentFloat32Origin); "" when not known.
  std::string float32_origin;
  // "dtype_mismatch: mat1 and mat2 must have the same dtype (in time_embed.0)",
  // "... (in denoiser.embed.time_mlp.0, aten::linear)", "... (in denoiser, aten::conv3d; its
  // weight is ...)"
  std::string Reason() const;
};

// `what` is the exception text (backtrace allowed); `module` the model's current module,
// `graph_op` the op node that ran last in it ("" when not known).
ClassifiedError ClassifyError(const std::string& what, const std::string& module = "",
                              const std::string& graph_op = "");

}  // namespace framegate
