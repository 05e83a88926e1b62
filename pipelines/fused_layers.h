// LibTorch's fused inference fast paths, taken apart so that a package's observers see
// inside them. nn.TransformerEncoderLayer and nn.MultiheadAttention compute a whole layer
// by one op (aten::_transformer_encoder_layer_fwd, aten::_native_multi_head_attention) in
// eval mode without grad; no observer sees, rounds, islands or names what such an op
// holds inside: the attention logits, the feed-forward's hidden values.
//
// A scripted layer calls the op inside `if <every condition holds>:` and computes the
// same layer by its own ops after it: the condition is made false (steered). A traced one
// has the op itself: it is replaced by the ops it computes (decomposed, the same
// arithmetic: q scaled before q @ k^T, softmax, the FFN's GELU or ReLU), without a mask
// only; an op with a mask is left fused.
//
// scaled_dot_product_attention (2.x; 1.13's private _scaled_dot_product_attention) is a
// fused kernel too: its logits and probabilities are inside it. It is decomposed into the
// math path (q @ k^T, masks, softmax, @ v), mask or not, so a package's attention is
// computed as the reference model's is without an attention backend; a policy that names
// one keeps the op (SdpaKernel::kKept), so the backend's kernel computes it.
//
// Before LibTorch 2.1, baddbmm with beta 0 is computed on a zeroed output: that CPU kernel
// reads its uninitialised output (pytorch/pytorch#96037), so diffusers' attention scores,
// baddbmm(torch.empty(..), q, k^T, beta=0), were NaN now and then.
#pragma once

namespace torch::jit {
struct Node;
struct Block;
}  // namespace torch::jit

namespace framegate {

enum class SdpaKernel {
  kDecomposed,  // the math path's ops, each seen (no attention backend named)
  kKept,        // one op, computed by the backend the policy names
};

struct UnfusedCount {
  int unfused = 0;     // steered or decomposed
  int left_fused = 0;  // a mask, or no way to take it apart
  int kept = 0;        // SDPA under SdpaKernel::kKept
};

// Unfuses every fused op in `block` and its nested blocks; adds to `count`.
void UnfuseFastPaths(torch::jit::Block* block, SdpaKernel sdpa, UnfusedCount& count);

}  // namespace framegate
