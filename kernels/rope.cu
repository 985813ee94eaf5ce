/* Rotary position embedding, both pair conventions. One thread per (token,
 * pair index i) and group of ROPE_HEADS heads: the angle is computed in
 * double (as the CPU reference does: positions reach 10^5 and more, where a
 * float angle loses the fraction) and applied to that pair in each head of
 * the group. Threads own disjoint pairs, so the update in place has no
 * races. */
#include "si-cuda-impl.cuh"

/* Heads per thread. A token's heads all share its angles, but a context
 * shift rotates every cached key as the heads of one "token" (n_kv x
 * n_head_kv of them): in one thread each, those would be tens of thousands
 * of dependent steps over 64 threads. blockIdx.y takes a group of heads. */
enum { ROPE_THREADS = 128, ROPE_HEADS = 64 };

/* cos and sin of pair i's angle at position pos, computed in double */
__device__ __forceinline__ void rope_angle(long pos, int i, int n_rot, float freq_base,
                                           const float *__restrict__ freq_factors, float *cs,
                                           float *sn)
{
    double theta = (double)pos * pow((double)freq_base, -2.0 * i / n_rot);
    if (freq_factors)
        theta /= (double)freq_factors[i];
    double sd, cd;
    sincos(theta, &sd, &cd);
    *cs = (float)cd;
    *sn = (float)sd;
}

/* the pair (*p0, *p1) rotated in place; no FMA contraction: the CPU
 * reference rounds each product */
__device__ __forceinline__ void rotate(float *p0, float *p1, float cs, float sn)
{
    const float x0 = *p0, x1 = *p1;
    *p0 = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    *p1 = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
}

__global__ void k_rope(float *x, long n_items, int n_heads, int head_dim, int half, int n_rot,
                       int pos0, const int32_t *pos_dev, float freq_base,
                       const float *__restrict__ freq_factors, int neox)
{
    if (pos_dev)
        pos0 = *pos_dev; /* a replayed decode graph: the position of this step */
    /* neox pairs (i, i + n_rot/2); llama pairs (2i, 2i+1) */
    const int off = neox ? half : 1, stride = neox ? 1 : 2;
    const int h0 = (int)blockIdx.y * ROPE_HEADS;
    const int h1 = n_heads - h0 < ROPE_HEADS ? n_heads : h0 + ROPE_HEADS;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n_items;
         idx += (long)gridDim.x * blockDim.x) {
        long t = idx / half;
        int i = (int)(idx % half);
        float cs, sn;
        rope_angle(pos0 + t, i, n_rot, freq_base, freq_factors, &cs, &sn);
        float *xt = x + (size_t)t * n_heads * head_dim + (size_t)i * stride;
        for (int h = h0; h < h1; h++) {
            float *p0 = xt + (size_t)h * head_dim;
            rotate(p0, p0 + off, cs, sn);
        }
    }
}

static int rope(si_cuda *c, float *x, int n_tokens, int n_heads, int head_dim, int n_rot,
                int pos0, const int32_t *pos_dev, float freq_base, const float *freq_factors,
                bool neox)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n_heads >= 0 && head_dim >= 0);
    if (n_rot > head_dim)
        n_rot = head_dim;
    if (n_tokens == 0 || n_heads == 0 || n_rot < 2)
        return 0; /* the CPU reference does nothing either */
    SI_ARG_CHECK(x);
    int half = n_rot / 2;
    long n_items = (long)n_tokens * half;
    /* gridDim.y's 65535 groups of 64 heads: a shift of 2^16 positions with
     * 64 KV heads (a cache far past any model here) */
    const long ny = ((long)n_heads + ROPE_HEADS - 1) / ROPE_HEADS;
    SI_ARG_CHECK(ny <= 65535);
    const dim3 grid(si_grid(n_items, ROPE_THREADS, 65535), (unsigned)ny);
    k_rope<<<grid, ROPE_THREADS, 0, c->stream>>>(
        x, n_items, n_heads, head_dim, half, n_rot, pos0, pos_dev, freq_base, freq_factors,
        neox ? 1 : 0);
    SI_LAUNCH_CHECK("k_rope");
    return 0;
}

/* rope of q and of k, then k and v into their caches' row of the position
 * (si_cuda_rope_store): items [0, n_tokens * (n_head + n_head_kv) * half)
 * are (token, head, pair), the pair rotated in its q or k head (k's also
 * written to the cache); the items after are the elements of a token's k/v
 * row: v into its cache, and k where its dim is not rotated. So the
 * rotated dims of k are written by the pair's thread only, the others by
 * their element's. A thread per pair and head, each computing its angle:
 * a thread per pair walking the heads in turn took 17 us a decode layer on
 * an H200 (32 dependent load-store rounds); the double-precision angle is
 * cheaper than one of those rounds. */
__global__ void k_rope_store(float *q, float *k, const float *__restrict__ v, int n_tokens,
                             int n_head, int n_head_kv, int head_dim, int half, int n_rot,
                             int pos0, const int32_t *pos_dev, float freq_base,
                             const float *__restrict__ freq_factors, int neox,
                             uint16_t *__restrict__ kc, uint16_t *__restrict__ vc)
{
    si_pdl_enter();
    if (pos_dev)
        pos0 = *pos_dev;
    const int off = neox ? half : 1, stride = neox ? 1 : 2;
    const long kvd = (long)n_head_kv * head_dim;
    const long per_tok = (long)(n_head + n_head_kv) * half, n_pairs = (long)n_tokens * per_tok;
    const long n_items = n_pairs + (long)n_tokens * kvd;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n_items;
         idx += (long)gridDim.x * blockDim.x) {
        if (idx >= n_pairs) {
            const long e = idx - n_pairs, t = e / kvd, j = e % kvd;
            const size_t at = (size_t)(pos0 + t) * kvd + j;
            vc[at] = si_f2h(v[(size_t)t * kvd + j]);
            if (j % head_dim >= 2 * half)
                kc[at] = si_f2h(k[(size_t)t * kvd + j]);
            continue;
        }
        const long t = idx / per_tok;
        const int r = (int)(idx % per_tok), h = r / half, i = r % half;
        float cs, sn;
        rope_angle(pos0 + t, i, n_rot, freq_base, freq_factors, &cs, &sn);
        const bool isk = h >= n_head;
        const int hh = isk ? h - n_head : h;
        float *base = isk ? k + (size_t)t * kvd : q + (size_t)t * n_head * head_dim;
        const size_t d0 = (size_t)hh * head_dim + (size_t)i * stride;
        rotate(base + d0, base + d0 + off, cs, sn);
        if (isk) {
            uint16_t *row = kc + (size_t)(pos0 + t) * kvd;
            row[d0] = si_f2h(base[d0]);
            row[d0 + off] = si_f2h(base[d0 + off]);
        }
    }
}

static int rope_store(si_cuda *c, float *q, float *k, const float *v, int n_tokens, int n_head,
                      int n_head_kv, int head_dim, int n_rot, int pos0, const int32_t *pos_dev,
                      float freq_base, const float *freq_factors, bool neox, uint16_t *kc,
                      uint16_t *vc)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n_head >= 0 && n_head_kv >= 0 && head_dim >= 0 &&
                 pos0 >= 0);
    if (n_rot > head_dim)
        n_rot = head_dim;
    const int half = n_rot >= 2 ? n_rot / 2 : 0; /* below 2: nothing rotates */
    const long n_items =
        (long)n_tokens * (n_head + n_head_kv) * half + (long)n_tokens * n_head_kv * head_dim;
    if (n_tokens == 0 || (n_head_kv == 0 && n_head == 0))
        return 0;
    SI_ARG_CHECK(q && k && v && kc && vc);
    SI_LAUNCH("k_rope_store", c, k_rope_store, si_grid(n_items, ROPE_THREADS, 65535), ROPE_THREADS, 0,
              q, k, v, n_tokens, n_head, n_head_kv, head_dim, half, n_rot, pos0, pos_dev, freq_base,
              freq_factors, neox ? 1 : 0, kc, vc);
    return 0;
}

extern "C" int si_cuda_rope_store(si_cuda *c, float *q, float *k, const float *v, int n_tokens,
                                  int n_head, int n_head_kv, int head_dim, int n_rot, int pos0,
                                  float freq_base, const float *freq_factors, bool neox,
                                  uint16_t *k_cache, uint16_t *v_cache)
{
    return rope_store(c, q, k, v, n_tokens, n_head, n_head_kv, head_dim, n_rot, pos0, NULL,
                      freq_base, freq_factors, neox, k_cache, v_cache);
}

extern "C" int si_cuda_rope_store_at(si_cuda *c, float *q, float *k, const float *v,
                                     int n_tokens, int n_head, int n_head_kv, int head_dim,
                                     int n_rot, const int32_t *pos_dev, float freq_base,
                                     const float *freq_factors, bool neox, uint16_t *k_cache,
                                     uint16_t *v_cache)
{
    SI_ARG_CHECK(pos_dev);
    return rope_store(c, q, k, v, n_tokens, n_head, n_head_kv, head_dim, n_rot, 0, pos_dev,
                      freq_base, freq_factors, neox, k_cache, v_cache);
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
