/* Dynamic-neuron counting at prefill, greedy argmax, sampling's candidates,
 * and per-token picking (the sketch, its scores, the k best) on the device.
 *
 * Counting (engine/topk.c, the host's code for select.c and the CPU
 * backend): per token, thr = the k-th largest rank value; every index whose
 * rank value is >= thr and above zero gets one count. Rank values are
 * mapped to uint32 keys whose unsigned order is the float order (|a|: the
 * bits without the sign; a: the sign-flip map, with -0 folded onto +0 since
 * the CPU compares floats, where -0 == +0), and the k-th largest key is
 * found exactly by a 4-pass radix select (8 bits a pass, a 256-bin
 * histogram in shared memory, one block per token). A second kernel gives
 * each index its count over all tokens (one thread per index, a loop over
 * tokens): no atomics on the counts, so the result is deterministic.
 * NaN activations are not ranked as the CPU ranks them (its keys put NaN
 * lowest, these put |NaN| highest); a NaN activation means a broken model.
 */
#include <math.h>

#include "si-cuda-impl.cuh"

enum { SEL_THREADS = 512, ARGMAX_THREADS = 256 };

__device__ __forceinline__ uint32_t rank_key(float a, int signed_rank)
{
    uint32_t b = __float_as_uint(a);
    if (!signed_rank)
        return b & 0x7fffffffu;
    if (b == 0x80000000u)
        b = 0; /* -0 == +0 */
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/* Number of positive activations over all tokens (signed rank's k). */
__global__ void k_count_pos(const float *__restrict__ act, long n, unsigned long long *__restrict__ npos)
{
    unsigned long long c = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        c += act[i] > 0.0f;
    /* warp sum, then one atomic per warp: integer, so still deterministic */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if (threadIdx.x % 32 == 0 && c)
        atomicAdd(npos, c);
}

/* The k-th largest of the keys key(j), j < n (1 <= k <= n), by a 4-pass
 * radix select: 8 bits a pass, a 256-bin histogram in shared memory; from
 * the top digit down, the digit where the count of keys above reaches k,
 * whose keys stay candidates. Every thread of the block (THREADS) calls it;
 * *ret_k: how many keys equal to the result are among the k largest. */
template <int THREADS, class Key>
__device__ uint32_t radix_kth(int n, int k, Key key, int *ret_k)
{
    __shared__ unsigned hist[256];
    __shared__ uint32_t s_prefix;
    __shared__ int s_k;
    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += THREADS)
            hist[i] = 0;
        __syncthreads();
        for (int j = threadIdx.x; j < n; j += THREADS) {
            const uint32_t kj = key(j);
            if ((kj & mask) == prefix)
                atomicAdd(&hist[(kj >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned cum = 0;
            int d = 255;
            for (; d > 0; d--) {
                if (cum + hist[d] >= (unsigned)k)
                    break;
                cum += hist[d];
            }
            s_prefix = prefix | ((uint32_t)d << shift);
            s_k = k - (int)cum;
        }
        __syncthreads();
        prefix = s_prefix;
        k = s_k;
        mask |= 255u << shift;
        /* hist is cleared at the top of the next pass, after this barrier */
        __syncthreads();
    }
    *ret_k = k;
    return prefix;
}

struct act_key {
    const float *a;
    int signed_rank;
    __device__ uint32_t operator()(int j) const { return rank_key(a[j], signed_rank); }
};

/* thr[t] = the k-th largest key of token t. k_abs > 0: that k; else k from
 * the positives count (signed rank), as topk.c computes it. */
__global__ void __launch_bounds__(SEL_THREADS)
k_topk_threshold(const float *__restrict__ act, int n_tokens, int n_sel, int k_abs, float alpha,
                 int signed_rank, const unsigned long long *__restrict__ npos, uint32_t *__restrict__ thr)
{
    int k = k_abs;
    if (k <= 0) {
        double mean_pos = (double)*npos / n_tokens;
        k = (int)llround((double)alpha * mean_pos);
    }
    if (k < 1)
        k = 1;
    if (k > n_sel)
        k = n_sel;
    int k_eq;
    const act_key key{ act + (size_t)blockIdx.x * n_sel, signed_rank };
    const uint32_t t = radix_kth<SEL_THREADS>(n_sel, k, key, &k_eq);
    /* a rank value of zero or below never votes (topk.c): the key of the
     * least positive value at least */
    const uint32_t lo = signed_rank ? 0x80000001u : 1u;
    if (threadIdx.x == 0)
        thr[blockIdx.x] = t < lo ? lo : t;
}

__global__ void k_topk_count(const float *__restrict__ act, int n_tokens, int n_sel, int signed_rank,
                             const uint32_t *__restrict__ thr, uint32_t *__restrict__ counts)
{
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < n_sel; j += (long)gridDim.x * blockDim.x) {
        uint32_t c = 0;
        for (int t = 0; t < n_tokens; t++)
            c += rank_key(act[(size_t)t * n_sel + j], signed_rank) >= thr[t];
        counts[j] += c;
    }
}

extern "C" int si_cuda_topk_count(si_cuda *c, const float *act, int n_tokens, int n_sel, float alpha,
                                  bool signed_rank, uint32_t *counts)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n_sel >= 0);
    if (n_tokens == 0 || n_sel == 0)
        return 0;
    SI_ARG_CHECK(act && counts);
    SI_ARG_CHECK(alpha > 0.0f && alpha <= 1.0f);
    size_t thr_b = si_align256((size_t)n_tokens * sizeof(uint32_t));
    void *p;
    int r = si_cuda__scratch(c, thr_b + 256, &p);
    if (r < 0)
        return r;
    uint32_t *thr = (uint32_t *)p;
    unsigned long long *npos = (unsigned long long *)((char *)p + thr_b);
    int k_abs = 0;
    if (signed_rank) {
        SI_CUDA_CHECK(cudaMemsetAsync(npos, 0, sizeof(*npos), c->stream));
        long n = (long)n_tokens * n_sel;
        k_count_pos<<<si_grid(n, 256, 1024), 256, 0, c->stream>>>(act, n, npos);
        SI_LAUNCH_CHECK("k_count_pos");
    } else {
        /* the same float expression as topk.c: (int)lround(alpha * n_sel) */
        k_abs = (int)lround(alpha * n_sel);
        if (k_abs < 1)
            k_abs = 1;
    }
    k_topk_threshold<<<n_tokens, SEL_THREADS, 0, c->stream>>>(act, n_tokens, n_sel, k_abs, alpha,
                                                             signed_rank ? 1 : 0, npos, thr);
    SI_LAUNCH_CHECK("k_topk_threshold");
    k_topk_count<<<si_grid(n_sel, 256, 4096), 256, 0, c->stream>>>(act, n_tokens, n_sel,
                                                                   signed_rank ? 1 : 0, thr, counts);
    SI_LAUNCH_CHECK("k_topk_count");
    return 0;
}

/* ---- greedy ---- */

__device__ __forceinline__ bool better(float v, int i, float bv, int bi)
{
    if (isnan(v))
        return false;
    if (bi < 0)
        return true;
    return v > bv || (v == bv && i < bi);
}

/* The best (value, index) of the warp's (v, i) by better(); every lane
 * gets it. */
__device__ __forceinline__ void warp_best(float *pv, int *pi)
{
    float bv = *pv;
    int bi = *pi;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    *pv = bv;
    *pi = bi;
}

/* The best (value, index) of the block's (v, i) by better(); every thread
 * gets it. ARGMAX_THREADS threads. */
__device__ void block_best(float *pv, int *pi)
{
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    float bv = *pv;
    int bi = *pi;
    warp_best(&bv, &bi);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    bv = lane < ARGMAX_THREADS / 32 ? sv[lane] : 0.0f;
    bi = lane < ARGMAX_THREADS / 32 ? si[lane] : -1;
    warp_best(&bv, &bi);
    __syncthreads(); /* sv and si are free for the next call */
    *pv = bv;
    *pi = bi;
}

/* Block b takes x [b chunk, (b + 1) chunk) and writes its best to
 * part_v/part_i [b]; the last block to finish (done: a counter at 0, put
 * back to 0 after) takes the best of the blocks' into *ret. One block
 * walking Llama 3's 128k logits alone took 25 us (ncu, H200), a load
 * round trip per 1024; ties go to the lower index in both steps, so the
 * result is the single block's. */
__global__ void __launch_bounds__(ARGMAX_THREADS)
k_argmax(const float *__restrict__ x, int n, int chunk, float *__restrict__ part_v,
         int *__restrict__ part_i, unsigned *__restrict__ done, int32_t *__restrict__ ret)
{
    __shared__ bool last;
    float bv = 0.0f;
    int bi = -1;
    const int lo = blockIdx.x * chunk, hi = n - lo < chunk ? n : lo + chunk;
    for (int i = lo + threadIdx.x; i < hi; i += ARGMAX_THREADS) {
        float v = x[i];
        if (better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    block_best(&bv, &bi);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0)
            *ret = bi;
        return;
    }
    if (threadIdx.x == 0) {
        part_v[blockIdx.x] = bv;
        part_i[blockIdx.x] = bi;
        __threadfence(); /* the block's best is visible before its count */
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence(); /* and the other blocks' before this one reads them */
    bv = 0.0f;
    bi = -1;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += ARGMAX_THREADS) {
        const float v = __ldcg(part_v + b);
        const int i = __ldcg(part_i + b);
        if (i >= 0 && better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    block_best(&bv, &bi);
    if (threadIdx.x == 0) {
        *ret = bi;
        *done = 0;
    }
}

extern "C" int si_cuda_argmax(si_cuda *c, const float *logits, int n, int32_t *ret_id)
{
    SI_ARG_CHECK(c && n >= 0 && ret_id);
    SI_ARG_CHECK(n == 0 || logits);
    /* blocks of at least 4 loads a thread, at most ARGMAX_BLOCKS of them */
    int blocks = (int)(((long)n + 4 * ARGMAX_THREADS - 1) / (4 * ARGMAX_THREADS));
    blocks = blocks < 1 ? 1 : blocks > ARGMAX_BLOCKS ? ARGMAX_BLOCKS : blocks;
    const int chunk = (int)(((long)n + blocks - 1) / blocks);
    k_argmax<<<blocks, ARGMAX_THREADS, 0, c->stream>>>(logits, n, chunk, c->argmax_v, c->argmax_i,
                                                      c->done + SI_CUDA_DONE_ARGMAX, ret_id);
    SI_LAUNCH_CHECK("k_argmax");
    return 0;
}

/* ---- per-token picking (ENG_PICK_TOKEN) ---- */

/* The sketch, quantized as the host does (quants.c q_q4_0): per block of
 * 32, d = (the value of largest magnitude, its first occurrence) / -8, and
 * code (int)clamp(v / d + 8.5, 0, 15) with v / d as v * (1 / d); every
 * product and sum rounded on its own (no fused multiply-add), so the bytes
 * equal the CPU's. One warp per row (slot s, gate h = 0 or up h = 1). */
__global__ void k_sketch_build(const uint16_t *__restrict__ gate_up, int n_slots, int E,
                               uint8_t *__restrict__ sketch)
{
    const int lane = threadIdx.x % 32;
    const long r = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= 2L * n_slots)
        return;
    const int nb = E / 32;
    const __half *src = reinterpret_cast<const __half *>(gate_up) + (size_t)r * E;
    uint8_t *row = sketch + (size_t)(r / 2) * 2 * nb * 18 + (size_t)(r % 2) * nb * 18;
    for (int b = 0; b < nb; b++) {
        const float v = __half2float(src[b * 32 + lane]);
        float a = isnan(v) ? -1.0f : fabsf(v);
        int idx = lane;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float oa = __shfl_xor_sync(0xffffffffu, a, o);
            int oi = __shfl_xor_sync(0xffffffffu, idx, o);
            if (oa > a || (oa == a && oi < idx)) {
                a = oa;
                idx = oi;
            }
        }
        /* the host keeps 0 when every value is 0 (its max starts at 0) */
        const float mx = a > 0.0f ? __shfl_sync(0xffffffffu, v, idx) : 0.0f;
        const float d = __fdiv_rn(mx, -8.0f);
        const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        float q = __fadd_rn(__fmul_rn(v, id), 8.5f);
        q = q < 0.0f ? 0.0f : q > 15.0f ? 15.0f : q;
        const int qi = __float2int_rz(q);
        const int hi = __shfl_down_sync(0xffffffffu, qi, 16);
        if (lane < 16)
            row[2 * nb + 16 * b + lane] = (uint8_t)(qi | hi << 4);
        /* the scale as one 16-bit store (rows start at even offsets). The
         * two byte stores this replaced read back 0 on an H200 in byte 0,
         * where the CPU has the first scale's low byte, in every shape of
         * test-cuda-backend (the host emulation matched the CPU); this
         * form is not yet checked on a GPU. */
        if (lane == 0)
            reinterpret_cast<uint16_t *>(row)[b] = __half_as_ushort(__float2half_rn(d));
    }
}

extern "C" int si_cuda_sketch_build(si_cuda *c, const si_cuda_ffn_weights *w, uint8_t *sketch)
{
    SI_ARG_CHECK(c && w && w->n_slots >= 0 && w->n_embd > 0 && w->n_embd % 32 == 0);
    if (w->n_slots == 0)
        return 0;
    SI_ARG_CHECK(w->gate_up && sketch && (uintptr_t)sketch % 2 == 0);
    k_sketch_build<<<si_grid(2L * w->n_slots, 8, 1u << 30), 256, 0, c->stream>>>(
        w->gate_up, w->n_slots, w->n_embd, sketch);
    SI_LAUNCH_CHECK("k_sketch_build");
    return 0;
}

/* The token in 8 bits per block of 32, as the CPU rounds it (backend-cpu.c
 * q8_round): scale amax / 127, codes rint(x * 127 / amax), and per block
 * the sum of the codes. One warp per block. */
__global__ void k_q8_round(const float *__restrict__ x, int nb, int8_t *__restrict__ q,
                           float *__restrict__ d, int32_t *__restrict__ sums)
{
    const int lane = threadIdx.x % 32;
    const int b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= nb)
        return;
    const float v = x[b * 32 + lane];
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    int c = __float2int_rn(__fmul_rn(v, inv));
    c = c > 127 ? 127 : c < -127 ? -127 : c;
    q[b * 32 + lane] = (int8_t)c;
    int s = c;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        d[b] = __fdiv_rn(amax, 127.0f);
        sums[b] = s;
    }
}

/* score[s] = |act(g~ . x~) * (u~ . x~)|: one warp per slot, a lane per
 * block of 32 (integer sums, then the two scales). With ALIGNED (an even
 * number of blocks per row, so every block's codes start on 4 bytes) the
 * codes are read 4 bytes at a time and summed with dp4a: low nibbles
 * against x~[4q..4q+3], high ones against x~[16+4q..]; the integer sums,
 * and so the scores, are the byte loop's exactly. */
template <bool ALIGNED>
__global__ void k_pick_score(const uint8_t *__restrict__ sketch, int n_slots, int nb,
                             const int8_t *__restrict__ xq, const float *__restrict__ xd,
                             const int32_t *__restrict__ xs, float *__restrict__ score, int gelu)
{
    const int lane = threadIdx.x % 32;
    const long s = (long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (s >= n_slots)
        return;
    float acc[2];
    for (int h = 0; h < 2; h++) {
        const uint8_t *row = sketch + (size_t)s * 2 * nb * 18 + (size_t)h * nb * 18;
        float a = 0.0f;
        for (int b = lane; b < nb; b += 32) {
            const uint8_t *codes = row + 2 * nb + 16 * b;
            const int8_t *xb = xq + 32 * b;
            int32_t isum = 0;
            if (ALIGNED) {
                const uint32_t *c4 = reinterpret_cast<const uint32_t *>(codes);
                const int *x4 = reinterpret_cast<const int *>(xb);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const uint32_t w = __ldg(c4 + q);
                    isum = __dp4a((int)(w & 0x0f0f0f0fu), __ldg(x4 + q), isum);
                    isum = __dp4a((int)((w >> 4) & 0x0f0f0f0fu), __ldg(x4 + 4 + q), isum);
                }
            } else {
                for (int j = 0; j < 16; j++)
                    isum += (codes[j] & 15) * xb[j] + (codes[j] >> 4) * xb[j + 16];
            }
            const uint16_t dh = (uint16_t)(row[2 * b] | row[2 * b + 1] << 8);
            a += __half2float(__ushort_as_half(dh)) * xd[b] * (float)(isum - 8 * xs[b]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            a += __shfl_xor_sync(0xffffffffu, a, o);
        acc[h] = a;
    }
    if (lane == 0) {
        score[s] = fabsf(si_act(acc[0], gelu) * acc[1]);
    }
}

enum { PICK_THREADS = 1024 };

/* Inclusive prefix sum of v over the warp. */
__device__ __forceinline__ int warp_scan(int v)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o)
            v += u;
    }
    return v;
}

/* Exclusive prefix sum of v over the block (PICK_THREADS threads, 32
 * warps); *total gets the sum. */
__device__ int block_scan(int v, int *total)
{
    __shared__ int warp_sum[32];
    __shared__ int s_total;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int incl = warp_scan(v);
    if (lane == 31)
        warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const int w = warp_sum[lane];
        const int wi = warp_scan(w);
        warp_sum[lane] = wi - w;
        if (lane == 31)
            s_total = wi;
    }
    __syncthreads();
    const int excl = warp_sum[warp] + incl - v;
    *total = s_total;
    __syncthreads(); /* warp_sum and s_total are reused by the next call */
    return excl;
}

/* A score's key: the float order of scores (>= 0: absolute values), NaN
 * below all. */
struct score_key {
    const float *s;
    __device__ uint32_t operator()(int j) const
    {
        const float v = s[j];
        return isnan(v) ? 0u : __float_as_uint(v) ^ 0x80000000u;
    }
};

/* The k best keys of key(0 .. n) (1 <= k <= n; ties to the lower index)
 * in index order: the k-th largest key (radix_kth), then, chunk by chunk,
 * every key above it and the first keys equal to it until k; emit(pos, j)
 * puts index j at position pos of the list. One block of PICK_THREADS. */
template <class Key, class Emit>
__device__ void best_in_order(int n, int k, Key key, Emit emit)
{
    int k_eq; /* how many keys equal to the threshold are taken */
    const uint32_t thr = radix_kth<PICK_THREADS>(n, k, key, &k_eq);
    int out = 0, eq_seen = 0;
    for (int base = 0; base < n; base += PICK_THREADS) {
        const int j = base + threadIdx.x;
        const uint32_t kj = j < n ? key(j) : 0u;
        const int eq = j < n && kj == thr, gt = j < n && kj > thr;
        int eq_total;
        const int eq_before = eq_seen + block_scan(eq, &eq_total);
        const int take = gt || (eq && eq_before < k_eq);
        int take_total;
        const int pos = out + block_scan(take, &take_total);
        if (take)
            emit(pos, j);
        out += take_total;
        eq_seen += eq_total;
    }
}

struct emit_slot {
    int32_t *sel;
    __device__ void operator()(int pos, int j) const { sel[pos] = j; }
};

/* The k best scores (NaN lowest, ties to the lower index) as an ascending
 * slot list. One block. */
__global__ void __launch_bounds__(PICK_THREADS)
k_pick_select(const float *__restrict__ score, int n, int k, int32_t *__restrict__ sel)
{
    best_in_order(n, k, score_key{ score }, emit_slot{ sel });
}

/* ---- sampling's candidates (engine.h eng_candidates) ---- */

/* A logit's key: engine/topk.c's float_key (the signed rank's key, -0
 * folded onto +0, and NaN below every number as key 0), so that the order
 * and the ties are the host's. */
struct logit_key {
    const float *x;
    __device__ uint32_t operator()(int j) const
    {
        const float v = x[j];
        return isnan(v) ? 0u : rank_key(v, 1);
    }
};

struct emit_cand {
    const float *logits;
    int base;
    float *v;
    int32_t *id;
    __device__ void operator()(int pos, int j) const
    {
        id[pos] = base + j;
        v[pos] = logits[base + j];
    }
};

/* Block b: the k best of logits [b chunk, b chunk + chunk) in index
 * order (best_in_order), with their values; the entries past
 * a short chunk's length padded with id -1 and value 0. */
__global__ void __launch_bounds__(PICK_THREADS)
k_top_cands(const float *__restrict__ logits, int n, int chunk, int k, float *__restrict__ vals,
            int32_t *__restrict__ ids)
{
    const int base = blockIdx.x * chunk;
    const int len = n - base < chunk ? n - base : chunk;
    const int want = k < len ? k : len;
    float *v = vals + (size_t)blockIdx.x * k;
    int32_t *id = ids + (size_t)blockIdx.x * k;
    best_in_order(len, want, logit_key{ logits + base }, emit_cand{ logits, base, v, id });
    for (int i = want + threadIdx.x; i < k; i += PICK_THREADS) {
        id[i] = -1;
        v[i] = 0.0f;
    }
}

extern "C" int si_cuda_top_cands(si_cuda *c, const float *logits, int n, int chunk, int k,
                                 float *vals, int32_t *ids)
{
    SI_ARG_CHECK(c && n >= 0 && k >= 1 && chunk >= k && chunk <= 8192);
    if (n == 0)
        return 0;
    SI_ARG_CHECK(logits && vals && ids);
    const int blocks = (int)(((long)n + chunk - 1) / chunk);
    k_top_cands<<<blocks, PICK_THREADS, 0, c->stream>>>(logits, n, chunk, k, vals, ids);
    SI_LAUNCH_CHECK("k_top_cands");
    return 0;
}

extern "C" size_t si_cuda_ffn_pick_work(int n_slots, int n_embd)
{
    const int nb = n_embd / 32;
    return si_align256((size_t)n_slots * sizeof(float)) + si_align256((size_t)n_slots * 4) +
           si_align256((size_t)n_embd) + 2 * si_align256((size_t)nb * 4);
}

extern "C" int si_cuda_ffn_pick(si_cuda *c, const si_cuda_ffn_weights *w, const uint8_t *sketch,
                                int k, const float *x, float *y, int n_tokens, void *work)
{
    SI_ARG_CHECK(c && w && n_tokens >= 0 && w->n_embd > 0 && w->n_slots >= 0);
    if (n_tokens == 0)
        return 0;
    SI_ARG_CHECK(x && y);
    const int E = w->n_embd, n = w->n_slots, nb = E / 32;
    if (k >= n || !sketch)
        return si_cuda_ffn(c, w, NULL, n, x, y, n_tokens, NULL);
    if (k <= 0) {
        SI_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n_tokens * E * sizeof(float), c->stream));
        return 0;
    }
    SI_ARG_CHECK(E % 32 == 0 && work);
    char *p = (char *)work;
    float *score = (float *)p;
    p += si_align256((size_t)n * sizeof(float));
    int32_t *sel = (int32_t *)p;
    p += si_align256((size_t)n * 4);
    int8_t *xq = (int8_t *)p;
    p += si_align256((size_t)E);
    float *xd = (float *)p;
    p += si_align256((size_t)nb * 4);
    int32_t *xs = (int32_t *)p;
    const bool aligned = nb % 2 == 0 && (uintptr_t)sketch % 4 == 0;
    for (int t = 0; t < n_tokens; t++) {
        const float *xt = x + (size_t)t * E;
        k_q8_round<<<(nb + 7) / 8, 256, 0, c->stream>>>(xt, nb, xq, xd, xs);
        SI_LAUNCH_CHECK("k_q8_round");
        if (aligned)
            k_pick_score<true><<<si_grid(n, 8, 1u << 30), 256, 0, c->stream>>>(sketch, n, nb, xq,
                                                                               xd, xs, score, w->gelu);
        else
            k_pick_score<false><<<si_grid(n, 8, 1u << 30), 256, 0, c->stream>>>(sketch, n, nb, xq,
                                                                                xd, xs, score, w->gelu);
        SI_LAUNCH_CHECK("k_pick_score");
        k_pick_select<<<1, PICK_THREADS, 0, c->stream>>>(score, n, k, sel);
        SI_LAUNCH_CHECK("k_pick_select");
        /* sel is written by k_pick_select just before: read after the wait */
        int r = si_cuda__ffn(c, w, sel, k, xt, y + (size_t)t * E, 1, NULL, false);
        if (r < 0)
            return r;
    }
    return 0;
}
