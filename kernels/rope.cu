/* Rotary position embedding, both pair conventions. One thread per (token,
 * pair index i): the angle is computed once in double (as the CPU reference
 * does: positions reach 10^5 and more, where a float angle loses the
 * fraction) and applied to that pair in every head. Threads own disjoint
 * pairs, so the update in place has no races. */
#include "si-cuda-impl.cuh"

enum { ROPE_THREADS = 128 };

__global__ void k_rope(float *x, long n_items, int n_heads, int head_dim, int half, int n_rot,
                       int pos0, const int32_t *pos_dev, float freq_base,
                       const float *__restrict__ freq_factors, int neox)
{
    if (pos_dev)
        pos0 = *pos_dev; /* a replayed decode graph: the position of this step */
    /* neox pairs (i, i + n_rot/2); llama pairs (2i, 2i+1) */
    const int off = neox ? half : 1, stride = neox ? 1 : 2;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n_items;
         idx += (long)gridDim.x * blockDim.x) {
        long t = idx / half;
        int i = (int)(idx % half);
        double pos = (double)pos0 + (double)t;
        double theta = pos * pow((double)freq_base, -2.0 * i / n_rot);
        if (freq_factors)
            theta /= (double)freq_factors[i];
        double sd, cd;
        sincos(theta, &sd, &cd);
        const float cs = (float)cd, sn = (float)sd;
        float *xt = x + (size_t)t * n_heads * head_dim + (size_t)i * stride;
        for (int h = 0; h < n_heads; h++) {
            float *p0 = xt + (size_t)h * head_dim, *p1 = p0 + off;
            float x0 = *p0, x1 = *p1;
            /* no FMA contraction: the CPU reference rounds each product */
            *p0 = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
            *p1 = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
        }
    }
}

static int rope(si_cuda *c, float *x, int n_tokens, int n_heads, int head_dim, int n_rot,
                int pos0, const int32_t *pos_dev, float freq_base, const float *freq_factors,
                bool neox)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n_heads >= 0 && head_dim >= 0 && pos0 >= 0);
    if (n_rot > head_dim)
        n_rot = head_dim;
    if (n_tokens == 0 || n_heads == 0 || n_rot < 2)
        return 0; /* the CPU reference does nothing either */
    SI_ARG_CHECK(x);
    int half = n_rot / 2;
    long n_items = (long)n_tokens * half;
    k_rope<<<si_grid(n_items, ROPE_THREADS, 65535), ROPE_THREADS, 0, c->stream>>>(
        x, n_items, n_heads, head_dim, half, n_rot, pos0, pos_dev, freq_base, freq_factors,
        neox ? 1 : 0);
    SI_LAUNCH_CHECK("k_rope");
    return 0;
}

extern "C" int si_cuda_rope(si_cuda *c, float *x, int n_tokens, int n_heads, int head_dim,
                            int n_rot, int pos0, float freq_base, const float *freq_factors,
                            bool neox)
{
    return rope(c, x, n_tokens, n_heads, head_dim, n_rot, pos0, NULL, freq_base, freq_factors,
                neox);
}

extern "C" int si_cuda_rope_at(si_cuda *c, float *x, int n_tokens, int n_heads, int head_dim,
                               int n_rot, const int32_t *pos_dev, float freq_base,
                               const float *freq_factors, bool neox)
{
    SI_ARG_CHECK(pos_dev);
    return rope(c, x, n_tokens, n_heads, head_dim, n_rot, 0, pos_dev, freq_base, freq_factors,
                neox);
}
