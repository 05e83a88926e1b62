// Analytic FLOP counts of the reference model (reference_model.cc) as written: the work
// a denoiser step and a decode ask of the matmul/convolution kernels, for benchmarks that
// report achieved GFLOP/s.
//
// What is counted: 2 FLOPs per multiply-add of every Linear (x W^T), convolution (every
// output element times Cin * kernel volume, zero padding included, as the kernels compute
// it) and of the two attention matmuls, QK^T and PV. What is not: bias adds, residual
// adds, norms, SiLU/GELU, softmax, the sinusoidal embeddings, upsampling and reshapes
// (elementwise work, a few percent of the total at every reference size).
//
// pipelines/flop_count_test.cc checks these formulas against a count made from the
// shapes the model's observer sees, so a change to reference_model.cc that is not
// mirrored here fails that test.
#pragma once

#include <cstdint>

#include "pipelines/pipeline_config.h"

namespace framegate {

// FLOPs of one ReferenceModel::PredictNoise on latents [batch, C, T, h, w] with
// conditioning [batch, L, D] (batch is 2 for a CFG step). batch >= 1.
int64_t DenoiserStepFlops(const ReferenceSize& size, int64_t batch);

// FLOPs of one ReferenceModel::Decode of latents [1, C, T, h, w] (all T frames).
int64_t DecodeFlops(const ReferenceSize& size);

}  // namespace framegate
