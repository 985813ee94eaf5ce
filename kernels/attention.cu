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
 *
 * Decode (one token) has its own kernel, k_attention_decode: a block per
 * (KV head, chunk of keys) serves all the query heads of its group, so
 * each K and V row is read once, and the chunks are small enough (32 keys
 * and up) that there are about two blocks per SM even at short contexts.
 * Scores: TPK threads per key, each a slice of the dims in 16-byte loads,
 * against the group's queries in shared memory. Softmax of the chunk: a
 * warp per head. Values: a warp per key slice, lanes over the dims in
 * 8-byte loads, summed over the warps in shared memory. The partials go to
 * the same combine as the split prefill kernel. The warp-per-query kernel
 * above walked its keys one dependent step at a time: 120 us per layer at
 * 1024 positions on an H200, more than the layer's weights take.
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
            int pos0, const int32_t *__restrict__ pos_dev, int chunk, int kbase, float scale,
            int window, float softcap)
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
    /* a sliding window: the split's keys before it are skipped. The
     * splits cover keys kbase.. (the window's first key for the batch's
     * first token, 0 without a window) */
    const long lo = window > 0 && n_kv > window ? n_kv - window : 0;
    const long c0 = (long)kbase + (long)split * chunk;
    const long k0 = c0 > lo ? c0 : lo;
    const long k1 = c0 + chunk < n_kv ? c0 + chunk : n_kv;
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
            if (softcap > 0.0f) /* Gemma 2; -inf stays below every capped score */
                s[j] = p + j < k1 ? softcap * tanhf(s[j] / softcap) : -INFINITY;
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

enum {
    DEC_THREADS = 128,
    DEC_WARPS = DEC_THREADS / 32,
    DEC_MAX_G = 8,        /* query heads per KV head (more: the kernel above) */
    DEC_MAX_SPLIT = 256,
    DEC_MIN_CHUNK = 32,
    DEC_MAX_CHUNK = 512   /* shared memory: scores of 8 heads x 512 keys */
};

/* Shared floats of the decode kernel: the group's queries and scores, then
 * (reused) the warps' partial outputs; m and l of each head after them. */
__host__ __device__ inline size_t dec_shared(int group, int hd, int chunk)
{
    size_t a = (size_t)group * hd + (size_t)group * chunk;
    size_t b = (size_t)DEC_WARPS * group * hd;
    return ((a > b ? a : b) + 2 * DEC_MAX_G) * sizeof(float);
}

__device__ __forceinline__ void unpack8(uint4 w, float f[8])
{
    const __half2 *h = reinterpret_cast<const __half2 *>(&w);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 t = __half22float2(h[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

/* out[qi][d] = sum_s o_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M), M = max m_s.
 * A block of COMB_THREADS per query head: the splits' weights e^(m_s - M)
 * are computed once into shared memory (fs, red), then each thread sums
 * its dims over the splits with the loads independent of each other. (A
 * thread per output element, each walking the splits twice in dependent
 * steps, took about 20 us at 1024 positions on an H200, more than the
 * attention itself.) Run by k_attention_combine, and by the decode
 * kernel's last block of a KV head (the "attn_combine" variant). */
enum { COMB_THREADS = 128, COMB_WARPS = COMB_THREADS / 32 };
enum { COMB_MAX_SPLIT = (int)DEC_MAX_SPLIT > (int)ATT_MAX_SPLIT ? (int)DEC_MAX_SPLIT : (int)ATT_MAX_SPLIT };

__device__ __forceinline__ void combine_head(const float *part_o, const float *part_ml, float *__restrict__ out,
                                             long n_q, int hd, int n_split, long qi, float *fs, float *red)
{
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    float m = -INFINITY;
    /* __ldcg: in the decode kernel's last block these are other blocks'
     * writes of the same launch, which only L2 holds for certain */
    for (int s = t; s < n_split; s += COMB_THREADS)
        m = fmaxf(m, __ldcg(part_ml + 2 * ((size_t)s * n_q + qi)));
    m = si_warp_max(m);
    if (lane == 0)
        red[warp] = m;
    __syncthreads();
    float M = red[0];
#pragma unroll
    for (int w = 1; w < COMB_WARPS; w++)
        M = fmaxf(M, red[w]);
    __syncthreads(); /* red is reused below */

    float l = 0.0f;
    for (int s = t; s < n_split; s += COMB_THREADS) {
        const size_t pi = (size_t)s * n_q + qi;
        const float ms = __ldcg(part_ml + 2 * pi);
        const float f = (M == -INFINITY || ms == -INFINITY) ? 0.0f : expf(ms - M);
        fs[s] = f;
        l = fmaf(__ldcg(part_ml + 2 * pi + 1), f, l);
    }
    l = si_warp_sum(l);
    if (lane == 0)
        red[warp] = l;
    __syncthreads();
    float L = 0.0f;
#pragma unroll
    for (int w = 0; w < COMB_WARPS; w++)
        L += red[w];

    for (int d = t; d < hd; d += COMB_THREADS) {
        float O = 0.0f;
#pragma unroll 8
        for (int s = 0; s < n_split; s++) {
            /* an empty split's o is not read into the sum (f = 0 there,
             * and its scratch need not hold a number) */
            const float o = __ldcg(part_o + ((size_t)s * n_q + qi) * hd + d);
            const float f = fs[s];
            O = fmaf(f != 0.0f ? o : 0.0f, f, O);
        }
        out[(size_t)qi * hd + d] = L > 0.0f ? O * (1.0f / L) : 0.0f;
    }
    __syncthreads(); /* fs and red may be used again by the caller */
}

__global__ void __launch_bounds__(COMB_THREADS)
k_attention_combine(const float *__restrict__ part_o, const float *__restrict__ part_ml,
                    float *__restrict__ out, long n_q, int hd, int n_split)
{
    __shared__ float fs[COMB_MAX_SPLIT];
    __shared__ float red[COMB_WARPS];
    si_pdl_enter();
    combine_head(part_o, part_ml, out, n_q, hd, n_split, blockIdx.x, fs, red);
}

/* The "attn_combine" variant: each block of a KV head's splits counts
 * itself done once its partials are written; the last one combines the
 * group's heads (combine_head, the same arithmetic as k_attention_combine,
 * so the same bits) and resets the counter for the next launch, which
 * starts after this one ends. One kernel less a decode layer. */
__device__ __forceinline__ void dec_combine_last(const float *part_o, const float *part_ml, float *__restrict__ out,
                                                 int n_head, int group, int hd, int n_split, int h0,
                                                 unsigned *done)
{
    __shared__ float fs[COMB_MAX_SPLIT];
    __shared__ float red[COMB_WARPS];
    __shared__ bool last;
    __threadfence(); /* this block's partials are visible before its count */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(done, 1u) == (unsigned)n_split - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence(); /* and the others' before this block reads them */
    for (int g = 0; g < group; g++)
        combine_head(part_o, part_ml, out, n_head, hd, n_split, h0 + g, fs, red);
    if (threadIdx.x == 0)
        *done = 0;
}

/* TPK threads per key in the score step (hd % (8 TPK) == 0); G >= group
 * heads per KV head, NC columns of 4 dims per lane (hd <= 128 NC); CMB:
 * the last block of each KV head combines the splits (done: its counters). */
template <int TPK, int G, int NC, bool CMB>
__global__ void __launch_bounds__(DEC_THREADS)
k_attention_decode(const float *__restrict__ q, const uint16_t *__restrict__ k,
                   const uint16_t *__restrict__ v, float *__restrict__ out,
                   float *__restrict__ part_o, float *__restrict__ part_ml, int n_head, int group,
                   int n_head_kv, int hd, int pos0, const int32_t *__restrict__ pos_dev, int chunk,
                   float scale, int window, float softcap, unsigned *__restrict__ done)
{
    extern __shared__ float sm[];
    float *qs = sm, *ss = sm + group * hd, *red = sm;
    float *mls = sm + (dec_shared(group, hd, chunk) / sizeof(float) - 2 * DEC_MAX_G);
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int kvh = blockIdx.x, split = blockIdx.y, n_split = gridDim.y, h0 = kvh * group;
    si_pdl_enter();
    if (pos_dev)
        pos0 = *pos_dev;
    /* the split's keys [k0, k0 + nk): chunks from the window's first key
     * (window > 0; plan_decode planned the splits for at most window
     * keys) */
    const long n_kv = (long)pos0 + 1;
    const long lo = window > 0 && n_kv > window ? n_kv - window : 0;
    const long k0 = lo + (long)split * chunk;
    const int nk = k0 >= n_kv ? 0 : (int)(n_kv - k0 < chunk ? n_kv - k0 : chunk);
    const size_t kv_stride = (size_t)n_head_kv * hd;

    if (nk == 0) {
        /* beyond the position (a graph's plan): an empty partial */
        for (int i = t; i < group * hd; i += DEC_THREADS)
            part_o[((size_t)split * n_head + h0) * hd + i] = 0.0f;
        if (t < group) {
            part_ml[2 * ((size_t)split * n_head + h0 + t)] = -INFINITY;
            part_ml[2 * ((size_t)split * n_head + h0 + t) + 1] = 0.0f;
        }
        if (CMB) /* the whole block: no barrier is left behind */
            dec_combine_last(part_o, part_ml, out, n_head, group, hd, n_split, h0, done + kvh);
        return;
    }
    for (int i = t; i < group * hd; i += DEC_THREADS)
        qs[i] = q[(size_t)h0 * hd + i] * scale;
    __syncthreads();

    /* scores: key c = base + t / TPK, dims [part * dpp, (part + 1) * dpp) */
    const int part = t % TPK, dpp = hd / TPK;
    const uint16_t *kb = k + (size_t)kvh * hd + (size_t)part * dpp;
    for (int base = 0; base < nk; base += DEC_THREADS / TPK) {
        const int c = base + t / TPK;
        float acc[G];
#pragma unroll
        for (int g = 0; g < G; g++)
            acc[g] = 0.0f;
        if (c < nk) {
            const uint4 *kr = reinterpret_cast<const uint4 *>(kb + (size_t)(k0 + c) * kv_stride);
#pragma unroll 4
            for (int i = 0; i < dpp / 8; i++) {
                float f[8];
                unpack8(__ldg(kr + i), f);
#pragma unroll
                for (int g = 0; g < G; g++) {
                    if (g < group) {
                        const float *qg = qs + g * hd + part * dpp + 8 * i;
#pragma unroll
                        for (int e = 0; e < 8; e++)
                            acc[g] = fmaf(qg[e], f[e], acc[g]);
                    }
                }
            }
        }
#pragma unroll
        for (int o = 1; o < TPK; o <<= 1)
#pragma unroll
            for (int g = 0; g < G; g++)
                acc[g] += __shfl_xor_sync(0xffffffffu, acc[g], o);
        if (part == 0 && c < nk)
#pragma unroll
            for (int g = 0; g < G; g++)
                if (g < group)
                    ss[g * chunk + c] = softcap > 0.0f ? softcap * tanhf(acc[g] / softcap) : acc[g];
    }
    __syncthreads();

    /* softmax of the chunk, a warp per head: p = e^(s - m) in place */
    for (int g = warp; g < group; g += DEC_WARPS) {
        float m = -INFINITY;
        for (int c = lane; c < nk; c += 32)
            m = fmaxf(m, ss[g * chunk + c]);
        m = si_warp_max(m);
        float l = 0.0f;
        for (int c = lane; c < nk; c += 32) {
            float p = expf(ss[g * chunk + c] - m);
            ss[g * chunk + c] = p;
            l += p;
        }
        l = si_warp_sum(l);
        if (lane == 0) {
            mls[2 * g] = m;
            mls[2 * g + 1] = l;
        }
    }
    __syncthreads();

    /* values: warp w takes keys w, w + DEC_WARPS, ...; lane the 4 dims of
     * columns lane, lane + 32, ... (8-byte loads: a row in one pass) */
    const int ncol = hd / 4;
    float o[G][NC][4];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int n = 0; n < NC; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                o[g][n][e] = 0.0f;
    const uint16_t *vb = v + (size_t)kvh * hd;
    /* unrolled so that a warp has several rows' loads in flight */
#pragma unroll 4
    for (int c = warp; c < nk; c += DEC_WARPS) {
        const uint2 *vr = reinterpret_cast<const uint2 *>(vb + (size_t)(k0 + c) * kv_stride);
        uint2 w[NC];
#pragma unroll
        for (int n = 0; n < NC; n++)
            w[n] = lane + 32 * n < ncol ? __ldg(vr + lane + 32 * n) : make_uint2(0, 0);
#pragma unroll
        for (int n = 0; n < NC; n++) {
            const __half2 *h = reinterpret_cast<const __half2 *>(&w[n]);
            float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
#pragma unroll
            for (int g = 0; g < G; g++) {
                if (g < group) {
                    const float p = ss[g * chunk + c];
                    o[g][n][0] = fmaf(p, f0.x, o[g][n][0]);
                    o[g][n][1] = fmaf(p, f0.y, o[g][n][1]);
                    o[g][n][2] = fmaf(p, f1.x, o[g][n][2]);
                    o[g][n][3] = fmaf(p, f1.y, o[g][n][3]);
                }
            }
        }
    }
    __syncthreads(); /* the scores are read: red reuses their memory */
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int n = 0; n < NC; n++)
            if (g < group && lane + 32 * n < ncol)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    red[((size_t)warp * group + g) * hd + 4 * (lane + 32 * n) + e] = o[g][n][e];
    __syncthreads();
    for (int i = t; i < group * hd; i += DEC_THREADS) {
        const int g = i / hd;
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < DEC_WARPS; w++)
            s += red[(size_t)w * group * hd + i];
        if (n_split == 1)
            out[(size_t)h0 * hd + i] = s / mls[2 * g + 1];
        else
            part_o[((size_t)split * n_head + h0) * hd + i] = s;
    }
    if (n_split > 1 && t < group) {
        part_ml[2 * ((size_t)split * n_head + h0 + t)] = mls[2 * t];
        part_ml[2 * ((size_t)split * n_head + h0 + t) + 1] = mls[2 * t + 1];
    }
    if (CMB && n_split > 1)
        dec_combine_last(part_o, part_ml, out, n_head, group, hd, n_split, h0, done + kvh);
}

/* How the key range is split; the same arithmetic for the scratch size and
 * the launch. */
static void plan(int n_sm, int n_tokens, long n_kv, int n_head, int head_dim, int *ret_split,
                 int *ret_chunk)
{
    long n_q = (long)n_tokens * n_head;
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

/* the most splits either kernel takes for one token */
static const int ATT_MAX_DECODE_SPLIT =
    (int)DEC_MAX_SPLIT > (int)ATT_MAX_SPLIT ? (int)DEC_MAX_SPLIT : (int)ATT_MAX_SPLIT;

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
        return split_bytes(ATT_MAX_DECODE_SPLIT, n_q, head_dim);
    int ns, chunk;
    plan(n_sm, n_tokens, (long)pos0 + n_tokens, n_head, head_dim, &ns, &chunk);
    if (ns <= 1)
        return 0;
    return split_bytes(ns, n_q, head_dim);
}

/* The decode kernel's plan: chunks of keys such that there are about two
 * blocks per SM, 32 keys at least; false where the kernel does not apply
 * (large GQA groups, head_dim not a multiple of 8 or above 256, unaligned
 * caches, contexts beyond DEC_MAX_SPLIT x DEC_MAX_CHUNK). */
static bool plan_decode(int n_sm, int pos0, int window, int n_head, int n_head_kv, int hd,
                        const void *k, const void *v, int *ret_split, int *ret_chunk, int *ret_tpk)
{
    const int group = n_head / n_head_kv;
    if (group > DEC_MAX_G || hd % 8 || hd > 256 || (uintptr_t)k % 16 || (uintptr_t)v % 16)
        return false;
    /* the keys a token attends to: its window's, at most */
    const long n_kv = window > 0 && (long)pos0 + 1 > window ? window : (long)pos0 + 1;
    const long want = (2L * n_sm + n_head_kv - 1) / n_head_kv;
    long chunk = (n_kv + want - 1) / want;
    if ((n_kv + chunk - 1) / chunk > DEC_MAX_SPLIT)
        chunk = (n_kv + DEC_MAX_SPLIT - 1) / DEC_MAX_SPLIT;
    chunk = (chunk + DEC_MIN_CHUNK - 1) / DEC_MIN_CHUNK * DEC_MIN_CHUNK;
    if (chunk > DEC_MAX_CHUNK)
        return false;
    int tpk = chunk >= 128 ? 1 : chunk >= 64 ? 2 : 4;
    while (hd % (8 * tpk))
        tpk /= 2;
    *ret_split = (int)((n_kv + chunk - 1) / chunk);
    *ret_chunk = (int)chunk;
    *ret_tpk = tpk;
    return true;
}

template <int TPK, int G>
static cudaError_t launch_decode_g(const si_cuda *c, dim3 grid, size_t shm, const float *q,
                            const uint16_t *k, const uint16_t *v, float *out, float *po,
                            float *pml, int n_head, int group, int n_head_kv, int hd, int pos0,
                            const int32_t *pos_dev, int chunk, float scale, int window,
                            float softcap, unsigned *done)
{
    /* CMB (done): an instance of its own, so that the default's code is
     * what it was without the variant */
    auto kern = hd <= 128 ? (done ? k_attention_decode<TPK, G, 1, true> : k_attention_decode<TPK, G, 1, false>)
                          : (done ? k_attention_decode<TPK, G, 2, true> : k_attention_decode<TPK, G, 2, false>);
    return si_launch(c, kern, grid, DEC_THREADS, shm, q, k, v, out, po, pml, n_head, group, n_head_kv, hd, pos0,
                     pos_dev, chunk, scale, window, softcap, done);
}

template <int TPK>
static cudaError_t launch_decode(const si_cuda *c, dim3 grid, size_t shm, const float *q,
                          const uint16_t *k, const uint16_t *v, float *out, float *po, float *pml,
                          int n_head, int group, int n_head_kv, int hd, int pos0,
                          const int32_t *pos_dev, int chunk, float scale, int window, float softcap,
                          unsigned *done)
{
#define SI_DEC_ARGS \
    c, grid, shm, q, k, v, out, po, pml, n_head, group, n_head_kv, hd, pos0, pos_dev, chunk, scale, window, \
        softcap, done
    cudaError_t e;
    if (group <= 1)
        e = launch_decode_g<TPK, 1>(SI_DEC_ARGS);
    else if (group <= 2)
        e = launch_decode_g<TPK, 2>(SI_DEC_ARGS);
    else if (group <= 4)
        e = launch_decode_g<TPK, 4>(SI_DEC_ARGS);
    else
        e = launch_decode_g<TPK, 8>(SI_DEC_ARGS);
    return e;
#undef SI_DEC_ARGS
}

template <int ND>
static void launch(cudaStream_t st, dim3 grid, const float *q, const uint16_t *k,
                   const uint16_t *v, float *out, float *po, float *pml, int n_q, int n_head,
                   int group, int n_head_kv, int hd, int pos0, const int32_t *pos_dev, int chunk,
                   int kbase, float scale, int window, float softcap)
{
    k_attention<ND><<<grid, ATT_WARPS * 32, 0, st>>>(q, k, v, out, po, pml, n_q, n_head, group,
                                                     n_head_kv, hd, pos0, pos_dev, chunk, kbase,
                                                     scale, window, softcap);
}

/* pos_dev NULL: at pos0. Else the position is read from pos_dev when the
 * kernel runs, and pos0 is the largest it may be: the key range is split
 * for that one, chunks past the real position come out empty. */
static int attention(si_cuda *c, const float *q, const uint16_t *k, const uint16_t *v, float *out,
                     int n_tokens, int pos0, const int32_t *pos_dev, int n_head, int n_head_kv,
                     int head_dim, float scale, int window, float softcap)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && pos0 >= 0 && n_head >= 0 && n_head_kv > 0 &&
                 head_dim >= 0 && window >= 0 && softcap >= 0.0f);
    if (n_tokens == 0 || n_head == 0 || head_dim == 0)
        return 0;
    SI_ARG_CHECK(q && k && v && out);
    SI_ARG_CHECK(n_head % n_head_kv == 0);
    SI_ARG_CHECK(head_dim <= 32 * ATT_MAX_ND);
    SI_ARG_CHECK((long)n_tokens * n_head <= INT32_MAX && (long)pos0 + n_tokens <= INT32_MAX);
    const int n_q = n_tokens * n_head, group = n_head / n_head_kv;

    /* Scratch: this call's, and at least what one token takes, whatever
     * its split: the capture of a decode step (split for its graph's
     * largest position) then finds it grown, by the prefill or by the
     * step before, and never has to grow it. */
    size_t need = si_cuda_attention_scratch(c->n_sm, n_tokens, pos0, n_head, head_dim);
    const size_t need1 = si_cuda_attention_scratch(c->n_sm, 1, pos0, n_head, head_dim);
    void *scr = NULL;
    int r = si_cuda__scratch(c, need > need1 ? need : need1, &scr);
    if (r < 0)
        return r;

    int ns, chunk, tpk = 1;
    unsigned *done = NULL; /* the decode kernel combines (below) */
    const bool dec = n_tokens == 1 && plan_decode(c->n_sm, pos0, window, n_head, n_head_kv,
                                                  head_dim, k, v, &ns, &chunk, &tpk);
    /* a window: no split before the first key the batch's first token
     * needs (a replayed graph's position is not known here: from 0). The
     * scratch sized above for all the keys is enough for fewer. */
    const int kbase = window > 0 && !pos_dev && pos0 + 1 > window ? pos0 + 1 - window : 0;
    if (!dec)
        plan(c->n_sm, n_tokens, (long)pos0 + n_tokens - kbase, n_head, head_dim, &ns, &chunk);
    float *po = NULL, *pml = NULL;
    if (ns > 1) {
        po = (float *)scr;
        pml = (float *)((char *)scr + si_align256((size_t)ns * n_q * head_dim * sizeof(float)));
    }
    if (dec) {
        dim3 grid((unsigned)n_head_kv, (unsigned)ns);
        size_t shm = dec_shared(group, head_dim, chunk);
        /* the "attn_combine" variant: the splits combined by each KV head's
         * last block (its counter in c->done) instead of a kernel */
        if (ns > 1 && c->attn_combine && c->done && n_head_kv <= SI_CUDA_DONE_COUNTERS) {
            SI_ARG_CHECK(ns <= COMB_MAX_SPLIT);
            done = c->done;
        }
        cudaError_t e;
        if (tpk == 4)
            e = launch_decode<4>(c, grid, shm, q, k, v, out, po, pml, n_head, group,
                                 n_head_kv, head_dim, pos0, pos_dev, chunk, scale, window, softcap, done);
        else if (tpk == 2)
            e = launch_decode<2>(c, grid, shm, q, k, v, out, po, pml, n_head, group,
                                 n_head_kv, head_dim, pos0, pos_dev, chunk, scale, window, softcap, done);
        else
            e = launch_decode<1>(c, grid, shm, q, k, v, out, po, pml, n_head, group,
                                 n_head_kv, head_dim, pos0, pos_dev, chunk, scale, window, softcap, done);
        if (e != cudaSuccess)
            return si_cuda__fail_cuda(e, "launch of k_attention_decode", __FILE__, __LINE__);
    } else {
        dim3 grid((unsigned)((n_q + ATT_WARPS - 1) / ATT_WARPS), (unsigned)ns);
        switch ((head_dim + 31) / 32) {
#define CASE(N)                                                                              \
    case N:                                                                                  \
        launch<N>(c->stream, grid, q, k, v, out, po, pml, n_q, n_head, group, n_head_kv,     \
                  head_dim, pos0, pos_dev, chunk, kbase, scale, window, softcap);            \
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
    }
    if (ns > 1 && !done) {
        SI_ARG_CHECK(ns <= COMB_MAX_SPLIT);
        SI_LAUNCH("k_attention_combine", c, k_attention_combine, (unsigned)n_q, COMB_THREADS, 0, po, pml,
                  out, (long)n_q, head_dim, ns);
    }
    return 0;
}

extern "C" int si_cuda_attention(si_cuda *c, const float *q, const uint16_t *k, const uint16_t *v,
                                 float *out, int n_tokens, int pos0, int n_head, int n_head_kv,
                                 int head_dim, float scale, int window, float softcap)
{
    return attention(c, q, k, v, out, n_tokens, pos0, NULL, n_head, n_head_kv, head_dim, scale,
                     window, softcap);
}

extern "C" int si_cuda_attention_at(si_cuda *c, const float *q, const uint16_t *k,
                                    const uint16_t *v, float *out, const int32_t *pos_dev,
                                    int max_pos, int n_head, int n_head_kv, int head_dim,
                                    float scale, int window, float softcap)
{
    SI_ARG_CHECK(pos_dev);
    return attention(c, q, k, v, out, 1, max_pos, pos_dev, n_head, n_head_kv, head_dim, scale,
                     window, softcap);
}
