/* Causal grouped-query attention over an f16 KV cache, prefill and decode.
 *
 * One warp per query row (token t, head h); lane l owns dims l, l + 32, ...
 * (ND = ceil(head_dim / 32) of them, head_dim <= 256), so K and V rows are
 * read by the warp as contiguous 64-byte pieces. Keys are taken KB at a
 * time: KB dot products are reduced across the warp together (independent
 * shuffles, no serial chain per key), then one online-softmax update (the
 * running max m, the sum l and the output o rescaled when m grows), as in
 * the CPU reference.
 *
 * Long contexts (flash-decoding): the key range is cut into n_split chunks,
 * blockIdx.y picks one, and each (query, chunk) writes its partial (m, l, o)
 * to scratch; a second kernel combines them. n_split is chosen so that
 * there are about 32 warps per SM; prefill with many queries runs with
 * n_split = 1 and writes the output directly.
 *
 * Warps of a block are consecutive heads of one token, which share the KV
 * head under GQA, so the cache rows they read are hot in L1/L2.
 *
 * No __syncthreads anywhere, so warps past the last query return early.
 */
#include <math.h>

#include "si-cuda-impl.cuh"

enum {
    ATT_WARPS = 4,
    ATT_KB = 8,         /* keys per online-softmax step */
    ATT_MAX_ND = 8,     /* head_dim <= 256 */
    ATT_MAX_SPLIT = 64,
    ATT_MIN_CHUNK = 128 /* keys per split, at least */
};

template <int ND>
__global__ void __launch_bounds__(ATT_WARPS * 32)
k_attention(const float *__restrict__ q, const uint16_t *__restrict__ k,
            const uint16_t *__restrict__ v, float *__restrict__ out, float *__restrict__ part_o,
            float *__restrict__ part_ml, int n_q, int n_head, int group, int n_head_kv, int hd,
            int pos0, const int32_t *__restrict__ pos_dev, int chunk, float scale)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (pos_dev)
        pos0 = *pos_dev; /* a replayed decode graph; the split plan covers every position */
    const long qi = (long)blockIdx.x * ATT_WARPS + warp;
    if (qi >= n_q)
        return;
    const int split = blockIdx.y, n_split = gridDim.y;
    const long t = qi / n_head;
    const int h = (int)(qi % n_head), kvh = h / group;
    const long n_kv = (long)pos0 + t + 1;
    const long k0 = (long)split * chunk;
    const long k1 = k0 + chunk < n_kv ? k0 + chunk : n_kv;
    const size_t kv_stride = (size_t)n_head_kv * hd;
    const uint16_t *kb = k + (size_t)kvh * hd, *vb = v + (size_t)kvh * hd;

    float qr[ND], o[ND];
    const float *qp = q + (size_t)qi * hd;
#pragma unroll
    for (int i = 0; i < ND; i++) {
        int d = lane + 32 * i;
        qr[i] = d < hd ? qp[d] : 0.0f;
        o[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;

    for (long p = k0; p < k1; p += ATT_KB) {
        float s[ATT_KB];
#pragma unroll
        for (int j = 0; j < ATT_KB; j++) {
            float acc = 0.0f;
            if (p + j < k1) {
                const uint16_t *kr = kb + (size_t)(p + j) * kv_stride;
#pragma unroll
                for (int i = 0; i < ND; i++) {
                    int d = lane + 32 * i;
                    if (d < hd)
                        acc = fmaf(qr[i], si_h2f(kr[d]), acc);
                }
            }
            s[j] = acc;
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int j = 0; j < ATT_KB; j++)
                s[j] += __shfl_xor_sync(0xffffffffu, s[j], off);
        /* every lane now holds the same s[]; p < k1, so s[0] is a real key */
        float bm = -INFINITY;
#pragma unroll
        for (int j = 0; j < ATT_KB; j++) {
            s[j] = p + j < k1 ? scale * s[j] : -INFINITY;
            bm = fmaxf(bm, s[j]);
        }
        if (bm > m) {
            /* m = -inf on the first step: nothing to rescale */
            float corr = m == -INFINITY ? 0.0f : expf(m - bm);
            l *= corr;
#pragma unroll
            for (int i = 0; i < ND; i++)
                o[i] *= corr;
            m = bm;
        }
#pragma unroll
        for (int j = 0; j < ATT_KB; j++) {
            if (p + j < k1) {
                float pj = expf(s[j] - m);
                l += pj;
                const uint16_t *vr = vb + (size_t)(p + j) * kv_stride;
#pragma unroll
                for (int i = 0; i < ND; i++) {
                    int d = lane + 32 * i;
                    if (d < hd)
                        o[i] = fmaf(pj, si_h2f(vr[d]), o[i]);
                }
            }
        }
    }

    if (n_split == 1) {
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *op = out + (size_t)qi * hd;
#pragma unroll
        for (int i = 0; i < ND; i++) {
            int d = lane + 32 * i;
            if (d < hd)
                op[d] = o[i] * inv;
        }
        return;
    }
    /* partial of this chunk; an empty chunk (beyond this token's keys)
     * writes m = -inf, l = 0, o = 0 and drops out of the combination */
    size_t pi = (size_t)split * n_q + qi;
    float *po = part_o + pi * hd;
#pragma unroll
    for (int i = 0; i < ND; i++) {
        int d = lane + 32 * i;
        if (d < hd)
            po[d] = o[i];
    }
    if (lane == 0) {
        part_ml[2 * pi] = m;
        part_ml[2 * pi + 1] = l;
    }
}

/* out[qi][d] = sum_s o_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M), M = max m_s. */
__global__ void k_attention_combine(const float *__restrict__ part_o,
                                    const float *__restrict__ part_ml, float *__restrict__ out,
                                    long n_q, int hd, int n_split)
{
    long n = n_q * hd;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (long)gridDim.x * blockDim.x) {
        long qi = idx / hd;
        float M = -INFINITY;
        for (int s = 0; s < n_split; s++)
            M = fmaxf(M, part_ml[2 * ((size_t)s * n_q + qi)]);
        float L = 0.0f, O = 0.0f;
        if (M != -INFINITY) {
            for (int s = 0; s < n_split; s++) {
                size_t pi = (size_t)s * n_q + qi;
                float ms = part_ml[2 * pi];
                if (ms == -INFINITY)
                    continue;
                float f = expf(ms - M);
                L = fmaf(part_ml[2 * pi + 1], f, L);
                O = fmaf(part_o[pi * hd + (idx - qi * hd)], f, O);
            }
        }
        out[idx] = L > 0.0f ? O * (1.0f / L) : 0.0f;
    }
}

/* How the key range is split; the same arithmetic for the scratch size and
 * the launch. */
static void plan(int n_sm, int n_tokens, int pos0, int n_head, int head_dim, int *ret_split,
                 int *ret_chunk)
{
    long n_q = (long)n_tokens * n_head;
    long n_kv = (long)pos0 + n_tokens;
    long want = ((long)n_sm * 32 + n_q - 1) / n_q; /* splits for ~32 warps per SM */
    long max_by_len = (n_kv + ATT_MIN_CHUNK - 1) / ATT_MIN_CHUNK;
    long ns = want < max_by_len ? want : max_by_len;
    if (ns > ATT_MAX_SPLIT)
        ns = ATT_MAX_SPLIT;
    /* scratch bounded to 256 MiB */
    while (ns > 1 && (size_t)ns * n_q * (head_dim + 2) * sizeof(float) > ((size_t)256 << 20))
        ns /= 2;
    if (ns < 1)
        ns = 1;
    long chunk = (n_kv + ns - 1) / ns;
    chunk = (chunk + ATT_KB - 1) / ATT_KB * ATT_KB;
    ns = (n_kv + chunk - 1) / chunk;
    *ret_split = (int)ns;
    *ret_chunk = (int)chunk;
}

static size_t split_bytes(long ns, size_t n_q, int head_dim)
{
    return si_align256((size_t)ns * n_q * head_dim * sizeof(float)) +
           si_align256((size_t)ns * n_q * 2 * sizeof(float));
}

/* One token (decode) asks for the most splits any position can take (a few
 * MB), whatever it needs now: the scratch then grows once, at the first
 * step, and never under a captured decode graph, which holds its address. */
extern "C" size_t si_cuda_attention_scratch(int n_sm, int n_tokens, int pos0, int n_head,
                                            int head_dim)
{
    if (n_sm <= 0 || n_tokens <= 0 || pos0 < 0 || n_head <= 0 || head_dim <= 0)
        return 0;
    size_t n_q = (size_t)n_tokens * n_head;
    if (n_tokens == 1)
        return split_bytes(ATT_MAX_SPLIT, n_q, head_dim);
    int ns, chunk;
    plan(n_sm, n_tokens, pos0, n_head, head_dim, &ns, &chunk);
    if (ns <= 1)
        return 0;
    return split_bytes(ns, n_q, head_dim);
}

template <int ND>
static void launch(cudaStream_t st, dim3 grid, const float *q, const uint16_t *k,
                   const uint16_t *v, float *out, float *po, float *pml, int n_q, int n_head,
                   int group, int n_head_kv, int hd, int pos0, const int32_t *pos_dev, int chunk,
                   float scale)
{
    k_attention<ND><<<grid, ATT_WARPS * 32, 0, st>>>(q, k, v, out, po, pml, n_q, n_head, group,
                                                     n_head_kv, hd, pos0, pos_dev, chunk, scale);
}

/* pos_dev NULL: at pos0. Else the position is read from pos_dev when the
 * kernel runs, and pos0 is the largest it may be: the key range is split
 * for that one, chunks past the real position come out empty. */
static int attention(si_cuda *c, const float *q, const uint16_t *k, const uint16_t *v, float *out,
                     int n_tokens, int pos0, const int32_t *pos_dev, int n_head, int n_head_kv,
                     int head_dim, float scale)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && pos0 >= 0 && n_head >= 0 && n_head_kv > 0 &&
                 head_dim >= 0);
    if (n_tokens == 0 || n_head == 0 || head_dim == 0)
        return 0;
    SI_ARG_CHECK(q && k && v && out);
    SI_ARG_CHECK(n_head % n_head_kv == 0);
    SI_ARG_CHECK(head_dim <= 32 * ATT_MAX_ND);
    SI_ARG_CHECK((long)n_tokens * n_head <= INT32_MAX && (long)pos0 + n_tokens <= INT32_MAX);
    const int n_q = n_tokens * n_head, group = n_head / n_head_kv;

    int ns, chunk;
    plan(c->n_sm, n_tokens, pos0, n_head, head_dim, &ns, &chunk);
    float *po = NULL, *pml = NULL;
    size_t need = si_cuda_attention_scratch(c->n_sm, n_tokens, pos0, n_head, head_dim);
    void *scr = NULL;
    if (need) {
        int r = si_cuda__scratch(c, need, &scr);
        if (r < 0)
            return r;
    }
    if (ns > 1) {
        po = (float *)scr;
        pml = (float *)((char *)scr + si_align256((size_t)ns * n_q * head_dim * sizeof(float)));
    }
    dim3 grid((unsigned)((n_q + ATT_WARPS - 1) / ATT_WARPS), (unsigned)ns);
    const int nd = (head_dim + 31) / 32;
    switch (nd) {
#define CASE(N)                                                                              \
    case N:                                                                                  \
        launch<N>(c->stream, grid, q, k, v, out, po, pml, n_q, n_head, group, n_head_kv,     \
                  head_dim, pos0, pos_dev, chunk, scale);                                    \
        break;
        CASE(1)
        CASE(2)
        CASE(3)
        CASE(4)
        CASE(5)
        CASE(6)
        CASE(7)
        CASE(8)
#undef CASE
    default:
        return si_cuda__fail(-EINVAL, "head_dim %d > %d", head_dim, 32 * ATT_MAX_ND);
    }
    SI_LAUNCH_CHECK("k_attention");
    if (ns > 1) {
        long n = (long)n_q * head_dim;
        k_attention_combine<<<si_grid(n, 256, 65535), 256, 0, c->stream>>>(po, pml, out, n_q,
                                                                           head_dim, ns);
        SI_LAUNCH_CHECK("k_attention_combine");
    }
    return 0;
}

extern "C" int si_cuda_attention(si_cuda *c, const float *q, const uint16_t *k, const uint16_t *v,
                                 float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                                 int head_dim, float scale)
{
    return attention(c, q, k, v, out, n_tokens, pos0, NULL, n_head, n_head_kv, head_dim, scale);
}

extern "C" int si_cuda_attention_at(si_cuda *c, const float *q, const uint16_t *k,
                                    const uint16_t *v, float *out, const int32_t *pos_dev,
                                    int max_pos, int n_head, int n_head_kv, int head_dim,
                                    float scale)
{
    SI_ARG_CHECK(pos_dev);
    return attention(c, q, k, v, out, 1, max_pos, pos_dev, n_head, n_head_kv, head_dim, scale);
}
