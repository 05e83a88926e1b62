#include "harness/error_class.h"

#include <gtest/gtest.h>

namespace framegate {
namespace {

TEST(ErrorClassTest, ClassifiesTheFieldReportMessages) {
  ClassifiedError e = ClassifyError(
      "mat1 and mat2 must have the same dtype, but got Float and Half\nException raised from ...",
      "time_embed.0");
  EXPECT_EQ(e.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(e.Reason(),
            "dtype_mismatch: mat1 and mat2 must have the same dtype, but got Float and Half "
            "(in time_embed.0)");
  EXPECT_EQ(ClassifyError("Input type (torch.cuda.FloatTensor) and weight type "
                          "(CUDABFloat16Type) should be the same")
                .cls,
            ErrorClass::kDtypeMismatch);
  EXPECT_EQ(ClassifyError("Promotion for Float8 Types is not supported, attempted to promote "
                          "Float8_e4m3fn and Float")
                .cls,
            ErrorClass::kFp8Promotion);
  e = ClassifyError("\"addmm_impl_cpu_\" not implemented for 'Half'");
  EXPECT_EQ(e.cls, ErrorClass::kUnsupportedOp);
  EXPECT_EQ(e.op, "addmm_impl_cpu_");
  EXPECT_EQ(ClassifyError("CUDA out of memory. Tried to allocate 2.00 GiB").cls, ErrorClass::kOutOfMemory);
  EXPECT_EQ(ClassifyError("something else entirely").cls, ErrorClass::kOther);
}

TEST(ErrorClassTest, ReadsTheRealMessageAndLocationOfATorchScriptTraceback) {
  const std::string what =
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript (most recent call last):\n"
      "  File \"code/__torch__/denoiser.py\", line 12, in forward\n"
      "    h = torch.linear(x, w)\n"
      "RuntimeError: mat1 and mat2 must have the same dtype\n";
  const ClassifiedError e = ClassifyError(what);
  EXPECT_EQ(e.cls, ErrorClass::kDtypeMismatch);
  EXPECT_EQ(e.message, "mat1 and mat2 must have the same dtype");
  EXPECT_EQ(e.module, "denoiser.py:12");
}

}  // namespace
}  // namespace framegate
