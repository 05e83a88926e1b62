#include "pipelines/flop_count.h"

namespace framegate {
namespace {

// 2 FLOPs per multiply-add.
constexpr int64_t kFlopsPerMac = 2;

// Linear over `rows` token rows: [rows, in] x [in, out].
int64_t LinearMacs(int64_t rows, int64_t in, int64_t out) { return rows * in * out; }

// Convolution with `outputs` output positions (N x spatial), Cout x Cin x kernel volume.
int64_t ConvMacs(int64_t outputs, int64_t cout, int64_t cin, int64_t kernel_volume) {
  return outputs * cout * cin * kernel_volume;
}

// Multi-head attention over n sequences of s queries attending to l keys of context
// width dc, hidden width h: q, k, v, out projections plus QK^T [n, heads, s, d] x
// [n, heads, d, l] and PV [n, heads, s, l] x [n, heads, l, d] (heads x d = h).
int64_t AttentionMacs(int64_t n, int64_t s, int64_t l, int64_t h, int64_t dc) {
  const int64_t projections = LinearMacs(n * s, h, h) +       // q
                              2 * LinearMacs(n * l, dc, h) +  // k, v
                              LinearMacs(n * s, h, h);        // out
  const int64_t logits = n * s * l * h;                       // QK^T
  const int64_t mix = n * s * l * h;                          // PV
  return projections + logits + mix;
}

int64_t Log2(int64_t v) {
  int64_t n = 0;
  while (v > 1) v >>= 1, ++n;
  return n;
}

}  // namespace

int64_t DenoiserStepFlops(const ReferenceSize& size, int64_t batch) {
  const LatentGeometry& g = size.latent;
  const int64_t b = batch, c = g.channels, t = g.frames, p = size.patch, h = size.hidden;
  const int64_t s = (g.height / p) * (g.width / p);  // tokens per frame, h' w'
  const int64_t tokens = b * t * s;                  // positions of [B, H, T, h', w']
  const int64_t l = g.cond_tokens, d = g.cond_dim;

  int64_t macs = ConvMacs(tokens, h, c, p * p);   // patch_embed, kernel (1, p, p), stride p
  macs += 2 * LinearMacs(b, h, h);                // time_embed.0, time_embed.2
  int64_t block = 2 * ConvMacs(tokens, h, h, 9);  // res.conv1, res.conv2, (1, 3, 3)
  block += LinearMacs(b, h, h);                   // res.temb
  block += AttentionMacs(b * t, s, s, h, h);      // spatial: [B T, h'w', H]
  block += AttentionMacs(b * s, t, t, h, h);      // temporal: [B h'w', T, H]
  block += AttentionMacs(b, t * s, l, h, d);      // cross: [B, T h'w', H] to [B, L, D]
  block += LinearMacs(tokens, h, 4 * h) + LinearMacs(tokens, 4 * h, h);  // ff.fc1, ff.fc2
  macs += size.depth * block;
  macs += ConvMacs(tokens, c * p * p, h, 1);  // out.proj, 1x1x1
  return kFlopsPerMac * macs;
}

int64_t DecodeFlops(const ReferenceSize& size) {
  const LatentGeometry& g = size.latent;
  const int64_t frames = g.frames;  // decoded as a batch of B T = T images
  int64_t pixels = frames * g.height * g.width;
  int64_t ch = size.decoder_channels;

  int64_t macs = ConvMacs(pixels, ch, g.channels, 9);  // conv_in
  macs += 2 * ConvMacs(pixels, ch, ch, 9);             // mid.conv1, mid.conv2
  for (int64_t u = 0; u < Log2(size.upsample); ++u) {
    pixels *= 4;                              // 2x nearest upsampling
    macs += ConvMacs(pixels, ch / 2, ch, 9);  // up<u>.conv
    ch /= 2;
    macs += 2 * ConvMacs(pixels, ch, ch, 9);  // up<u>.res.conv1, conv2
  }
  macs += ConvMacs(pixels, 3, ch, 9);  // conv_out
  return kFlopsPerMac * macs;
}

}  // namespace framegate
