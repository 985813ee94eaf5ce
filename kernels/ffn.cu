/* Gated FFN (SwiGLU, or GeGLU with w->gelu) over a subset of neuron slots (neuron-major f16 layout).
 *
 * Decode (one token) reads only the selected slots, in three kernels:
 *   1. k_ffn_act: one warp per selected index j (its first loads issued
 *      before the previous kernel ends, si_launch): the gate and up rows of
 *      slot s_j (2 x n_embd contiguous halves) against x, a_j = act(g) * u
 *      (0 for a slot out of range), into act.
 *   2. k_ffn_down: y = sum_j a_j down[s_j]. A block owns a tile of 128
 *      columns (4 per lane, one 8-byte load per down row, so a warp reads
 *      256 contiguous bytes) and a chunk of the selected indices, which its
 *      eight warps share in groups of 8 (8 loads in flight per thread); the
 *      warps' sums meet in shared memory. With one chunk the block writes
 *      y; with several, each chunk writes its partial row into scratch
 *      ([n_chunks][n_embd], small enough to stay in L2) and
 *   3. k_ffn_reduce sums the partials per column, in a fixed order (the
 *      result does not depend on scheduling, unlike float atomics).
 *
 * Two other ways for decode, kept as variants to time against this one
 * on a GPU (si_cuda_set_variant "ffn_decode", not yet measured): 1. the
 * gate and up rows as the rows of one GEMV (k_ffn_gu), the activation in
 * the down kernel; 2. one pass (k_ffn_fused) and the reduction.
 *
 * Prefill (several tokens) goes through cuBLAS in chunks of FFN_SLOT_CHUNK
 * selected indices: the chunk's gate/up rows and down rows (gathered into
 * scratch when there is a selection, used in place when all slots 0..n-1 are
 * computed), H = x GU^T (f32), a = silu(H_gate) * H_up (into act and, as f16,
 * into A), y (+)= A DN. x and a are rounded to f16 for the tensor cores.
 */
#include "gemv-row.cuh"
#include "norm-fold.cuh"

enum {
    FFN_THREADS = 256,
    FFN_WARPS = FFN_THREADS / 32,
    FFN_TILE = 32 * 4,          /* columns per down block: a warp's lanes x 4 */
    FFN_MIN_CHUNK = 64,         /* selected indices per down block, at least */
    FFN_SLOT_CHUNK = 1024,      /* prefill: selected indices per GEMM pair */
    FFN_DOWN_UNROLL = 8,        /* down rows per step: 8-byte loads in flight per thread */
};

__device__ __forceinline__ int slot_of(const int32_t *__restrict__ sel, long j, int n_slots)
{
    long s = sel ? (long)sel[j] : j;
    return (s >= 0 && s < n_slots) ? (int)s : -1;
}

/* ---- decode ---- */

/* A warp's walk of one slot's gate and up rows (16-byte loads, n8 of
 * them a row, 0 for no slot): gu_first issues a lane's first U of each;
 * gu_dot uses them, issuing each next U before it uses the ones before,
 * and returns the lane's parts of gate . x and up . x. U predicated loads
 * a lane in flight: a row of n_embd 3072 (12 loads a lane) in three memory
 * latencies with U = 4. */
template <int U>
__device__ __forceinline__ void gu_first(const uint4 *g4, const uint4 *u4, int n8, int lane, uint4 gv[U],
                                         uint4 uv[U])
{
#pragma unroll
    for (int k = 0; k < U; k++) {
        const int cc = lane + 32 * k;
        gv[k] = cc < n8 ? __ldcs(g4 + cc) : make_uint4(0, 0, 0, 0);
        uv[k] = cc < n8 ? __ldcs(u4 + cc) : make_uint4(0, 0, 0, 0);
    }
}

template <int U, bool LDG = true>
__device__ __forceinline__ void gu_dot(const uint4 *g4, const uint4 *u4, int n8, int lane,
                                       const float4 *__restrict__ x4, uint4 gv[U], uint4 uv[U], float *ret_g,
                                       float *ret_u)
{
    float ga = 0.0f, ua = 0.0f, gb = 0.0f, ub = 0.0f;
    for (int c = lane; c < n8; c += 32 * U) {
#pragma unroll
        for (int k = 0; k < U; k++) {
            const int cc = c + 32 * k;
            if (cc >= n8)
                break;
            /* x in shared memory (k_ffn_act_norm): plain loads */
            const float4 xa = LDG ? __ldg(x4 + 2 * cc) : x4[2 * cc];
            const float4 xb = LDG ? __ldg(x4 + 2 * cc + 1) : x4[2 * cc + 1];
            if (k % 2) {
                gb = si_dot8(gv[k], xa, xb, gb);
                ub = si_dot8(uv[k], xa, xb, ub);
            } else {
                ga = si_dot8(gv[k], xa, xb, ga);
                ua = si_dot8(uv[k], xa, xb, ua);
            }
        }
        const int cn = c + 32 * U;
        if (cn < n8) {
#pragma unroll
            for (int k = 0; k < U; k++) {
                const int cc = cn + 32 * k;
                gv[k] = cc < n8 ? __ldcs(g4 + cc) : make_uint4(0, 0, 0, 0);
                uv[k] = cc < n8 ? __ldcs(u4 + cc) : make_uint4(0, 0, 0, 0);
            }
        }
    }
    *ret_g = ga + gb;
    *ret_u = ua + ub;
}

/* pre: the selection is not written by the step's kernels (a plan's, or
 * all slots), so the first gate and up loads may go before the wait for x
 * (si_launch); a selection picked per token in the step is read after it. */
template <bool VEC, int FFN_ACT_UNROLL>
__global__ void __launch_bounds__(FFN_THREADS)
k_ffn_act(const uint16_t *__restrict__ gate_up, int E, int n_slots, const int32_t *__restrict__ sel,
          int n_sel, const float *__restrict__ x, float *__restrict__ act, int gelu, int pre)
{
    const int lane = threadIdx.x % 32;
    const long j = (long)blockIdx.x * FFN_WARPS + threadIdx.x / 32;
    if (!pre)
        si_pdl_wait();
    const int s = j < n_sel ? slot_of(sel, j, n_slots) : -1;
    const uint16_t *g = gate_up + (size_t)(s < 0 ? 0 : s) * 2 * E, *u = g + E;
    float ga = 0.0f, ua = 0.0f;
    if (VEC) {
        /* FFN_ACT_UNROLL gate and up loads a lane in flight, the first
         * ones before the wait for x. 4 of each (62 registers) beat 8 (98
         * registers, 2 blocks an SM) on an H200: more warps resident
         * smooth the waves */
        const uint4 *g4 = reinterpret_cast<const uint4 *>(g), *u4 = reinterpret_cast<const uint4 *>(u);
        const int n8 = s < 0 ? 0 : E / 8;
        uint4 gv[FFN_ACT_UNROLL], uv[FFN_ACT_UNROLL];
        gu_first<FFN_ACT_UNROLL>(g4, u4, n8, lane, gv, uv);
        si_pdl_enter();
        gu_dot<FFN_ACT_UNROLL>(g4, u4, n8, lane, reinterpret_cast<const float4 *>(x), gv, uv, &ga, &ua);
    } else {
        si_pdl_enter();
        if (s >= 0)
            for (int k = lane; k < E; k += 32) {
                float xv = __ldg(x + k);
                ga = fmaf(si_h2f(g[k]), xv, ga);
                ua = fmaf(si_h2f(u[k]), xv, ua);
            }
    }
    if (j >= n_sel)
        return; /* no barriers in this kernel */
    ga = si_warp_sum(ga);
    ua = si_warp_sum(ua);
    if (lane == 0)
        act[j] = s < 0 ? 0.0f : si_act(ga, gelu) * ua; /* 0 for a slot out of range */
}

/* k_ffn_act with the FFN's norm folded in (norm-fold.cuh; the "norm_fold"
 * variant of si_cuda_norm_ffn): after the wait each block stages x + res
 * normalized in shared memory, and its warps read that. A plan's
 * selection only (its loads go before the wait); 16-byte loads. */
template <int FFN_ACT_UNROLL>
__global__ void __launch_bounds__(FFN_THREADS)
k_ffn_act_norm(const uint16_t *__restrict__ gate_up, int E, int n_slots, const int32_t *__restrict__ sel,
               int n_sel, float *__restrict__ act, int gelu, const si_norm_in nm)
{
    extern __shared__ float4 sx[]; /* the normalized row: E / 4 */
    __shared__ double red[FFN_WARPS];
    __shared__ bool last;
    const int lane = threadIdx.x % 32;
    const long j = (long)blockIdx.x * FFN_WARPS + threadIdx.x / 32;
    const int s = j < n_sel ? slot_of(sel, j, n_slots) : -1;
    const uint4 *g4 = reinterpret_cast<const uint4 *>(gate_up + (size_t)(s < 0 ? 0 : s) * 2 * E);
    const uint4 *u4 = g4 + E / 8;
    const int n8 = s < 0 ? 0 : E / 8;
    uint4 gv[FFN_ACT_UNROLL], uv[FFN_ACT_UNROLL];
    gu_first<FFN_ACT_UNROLL>(g4, u4, n8, lane, gv, uv);
    si_pdl_enter();
    si_norm_stage(nm, sx, red, &last);
    float ga, ua;
    gu_dot<FFN_ACT_UNROLL, false>(g4, u4, n8, lane, sx, gv, uv, &ga, &ua);
    ga = si_warp_sum(ga);
    ua = si_warp_sum(ua);
    if (j < n_sel && lane == 0)
        act[j] = s < 0 ? 0.0f : si_act(ga, gelu) * ua;
    __syncthreads(); /* `last` written */
    if (last)
        si_norm_finish(nm, sx);
}

/* The "ffn_decode" variant 1, step 1: the selected slots' gate and up
 * rows as the rows of one GEMV (gemv-row.cuh: WPR warps a row, WPR chosen
 * as the GEMV's, so 3277 selected slots make 6554 rows over ~1600 blocks
 * instead of 410 blocks of a warp per slot), gu[2j] = gate[s_j] . x and
 * gu[2j + 1] = up[s_j] . x (0 for a slot out of range); the down kernel
 * applies the activation. pre as k_ffn_act's. */
template <int WPR, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS)
k_ffn_gu(const uint16_t *__restrict__ gate_up, int E, int n_slots, const int32_t *__restrict__ sel,
         int n_sel, const float *__restrict__ x, float *__restrict__ gu, int pre)
{
    __shared__ float red[GEMV_WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long r = (long)blockIdx.x * (GEMV_WARPS / WPR) + warp / WPR;
    if (!pre)
        si_pdl_wait();
    const int s = r < 2L * n_sel ? slot_of(sel, r >> 1, n_slots) : -1;
    const uint16_t *wr = gate_up + ((size_t)(s < 0 ? 0 : s) * 2 + (size_t)(r & 1)) * E;
    const float acc = gemv_row_part<WPR, VEC>(wr, s < 0 ? 0 : E, x, warp % WPR, lane);
    const float sum = gemv_row_sum<WPR>(acc, red, warp, lane);
    if (warp % WPR == 0 && lane == 0 && r < 2L * n_sel)
        gu[r] = s < 0 ? 0.0f : sum;
}

/* GU: act holds k_ffn_gu's pairs (gate, up) per selected index, and the
 * kernel applies the activation (gelu); the blocks of the first tile write
 * a_j into act_out when it is not NULL. */
template <bool VEC, bool GU>
__global__ void __launch_bounds__(FFN_THREADS)
k_ffn_down(const uint16_t *__restrict__ down, int E, int n_slots, const int32_t *__restrict__ sel,
           int n_sel, const float *__restrict__ act, int chunk, float *__restrict__ out, int gelu,
           float *__restrict__ act_out)
{
    __shared__ float red[FFN_WARPS][FFN_TILE];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long c0 = (long)blockIdx.x * FFN_TILE + 4L * lane;
    const long j0 = (long)blockIdx.y * chunk;
    const long j1 = j0 + chunk < n_sel ? j0 + chunk : n_sel;
    float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    si_pdl_enter();
    if (c0 < E) {
        /* warp w takes the groups of FFN_DOWN_UNROLL indices starting at
         * j0 + w * FFN_DOWN_UNROLL, every FFN_WARPS-th group */
        for (long j = j0 + (long)warp * FFN_DOWN_UNROLL; j < j1;
             j += (long)FFN_WARPS * FFN_DOWN_UNROLL) {
            int s[FFN_DOWN_UNROLL];
            float a[FFN_DOWN_UNROLL];
#pragma unroll
            for (int u = 0; u < FFN_DOWN_UNROLL; u++) {
                s[u] = j + u < j1 ? slot_of(sel, j + u, n_slots) : -1;
                if (GU)
                    a[u] = s[u] >= 0 ? si_act(act[2 * (j + u)], gelu) * act[2 * (j + u) + 1] : 0.0f;
                else
                    a[u] = s[u] >= 0 ? act[j + u] : 0.0f;
                if (GU && act_out && blockIdx.x == 0 && lane == 0 && j + u < j1)
                    act_out[j + u] = a[u];
            }
            if (VEC) {
                uint2 w[FFN_DOWN_UNROLL];
#pragma unroll
                for (int u = 0; u < FFN_DOWN_UNROLL; u++)
                    w[u] = s[u] >= 0 ? __ldcs(reinterpret_cast<const uint2 *>(down + (size_t)s[u] * E + c0))
                                     : make_uint2(0, 0);
#pragma unroll
                for (int u = 0; u < FFN_DOWN_UNROLL; u++) {
                    if (s[u] < 0)
                        continue;
                    const __half2 *h = reinterpret_cast<const __half2 *>(&w[u]);
                    float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
                    acc[0] = fmaf(a[u], f0.x, acc[0]);
                    acc[1] = fmaf(a[u], f0.y, acc[1]);
                    acc[2] = fmaf(a[u], f1.x, acc[2]);
                    acc[3] = fmaf(a[u], f1.y, acc[3]);
                }
            } else {
#pragma unroll
                for (int u = 0; u < FFN_DOWN_UNROLL; u++) {
                    if (s[u] < 0)
                        continue;
                    const uint16_t *d = down + (size_t)s[u] * E;
#pragma unroll
                    for (int q = 0; q < 4; q++)
                        if (c0 + q < E)
                            acc[q] = fmaf(a[u], si_h2f(d[c0 + q]), acc[q]);
                }
            }
        }
    }
    /* the warps' sums per column, added in warp order */
#pragma unroll
    for (int q = 0; q < 4; q++)
        red[warp][4 * lane + q] = acc[q];
    __syncthreads();
    const long c = (long)blockIdx.x * FFN_TILE + threadIdx.x;
    if (threadIdx.x < FFN_TILE && c < E) {
        float t = 0.0f;
#pragma unroll
        for (int w = 0; w < FFN_WARPS; w++)
            t += red[w][threadIdx.x];
        out[(size_t)blockIdx.y * E + c] = t; /* y itself when gridDim.y == 1 */
    }
}

/* y[c] = sum over the chunks of part[k][c], in a fixed order: a block
 * takes 32 columns, warp w sums the chunks k = w mod 8 (the loads of a warp
 * are one 128-byte line), then warp 0 adds the eight sums in warp order.
 * With 1024-column down tiles there were ~340 chunks and this took 8.3 us
 * of a Llama-3.2-3B decode layer on an H200; the 128-column tiles leave
 * ~45 (8 blocks per SM over 24 tiles). */
__global__ void __launch_bounds__(FFN_THREADS)
k_ffn_reduce(const float *__restrict__ part, int n_chunks, int E, float *__restrict__ y)
{
    __shared__ float red[FFN_WARPS][32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long c = (long)blockIdx.x * 32 + lane;
    float s = 0.0f;
    si_pdl_enter();
    if (c < E) {
#pragma unroll 4
        for (int k = warp; k < n_chunks; k += FFN_WARPS)
            s += part[(size_t)k * E + c];
    }
    red[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && c < E) {
        float t = 0.0f;
#pragma unroll
        for (int w = 0; w < FFN_WARPS; w++)
            t += red[w][lane];
        y[c] = t;
    }
}

/* The "ffn_decode" variant 2: the whole decode FFN in one pass over the
 * weights and a reduction. Block b takes the selected indices [b chunk,
 * (b + 1) chunk), at most one block an SM: (1) its 16 warps compute a_j
 * for them, a warp a slot at a time (gate and up rows as k_ffn_act, the
 * next slot's first loads issued before the current slot's sum), into
 * shared memory; (2) all 512 threads then walk the chunk's down rows, each
 * a row's 8 consecutive columns (a block reads each 2-byte row whole and
 * in order), FFN_DOWN_UNROLL rows in flight, and write the block's partial
 * row; k_ffn_reduce sums the partials in block order. Against k_ffn_act +
 * k_ffn_down: one kernel's ramp and tail instead of two, and every down
 * row read contiguously. pre as k_ffn_act's; act_out (not NULL) gets a_j.
 * Shared memory: chunk floats and chunk ints. (One block an SM, or two:
 * the "ffn_fused_bps" variant, so that one block's down rows stream while
 * the other computes activations, for twice the partial rows.) */
enum { FUSED_THREADS = 512, FUSED_WARPS = FUSED_THREADS / 32, FUSED_GU_UNROLL = 4 };

/* A warp's slot done: its lanes' parts summed, a_j (0 for no slot) and
 * the slot kept in shared memory, and in act_out when there is one. */
__device__ __forceinline__ void fused_keep(float ga, float ua, int s, int jj, long j0, int lane, int gelu,
                                           float *as, int *ss, float *__restrict__ act_out)
{
    ga = si_warp_sum(ga);
    ua = si_warp_sum(ua);
    if (lane == 0) {
        const float a = s < 0 ? 0.0f : si_act(ga, gelu) * ua;
        as[jj] = a;
        ss[jj] = s;
        if (act_out)
            act_out[j0 + jj] = a;
    }
}

template <bool VEC>
__global__ void __launch_bounds__(FUSED_THREADS)
k_ffn_fused(const uint16_t *__restrict__ gate_up, const uint16_t *__restrict__ down, int E, int n_slots,
            const int32_t *__restrict__ sel, int n_sel, const float *__restrict__ x, int chunk,
            float *__restrict__ part, float *__restrict__ act_out, int gelu, int pre)
{
    extern __shared__ float fsm[];
    float *as = fsm;                                  /* [chunk] a_j */
    int *ss = reinterpret_cast<int *>(fsm + chunk);   /* [chunk] slot, -1 out of range */
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long j0 = (long)blockIdx.x * chunk;
    const int nj = j0 >= n_sel ? 0 : (int)(n_sel - j0 < chunk ? n_sel - j0 : chunk);
    if (!pre)
        si_pdl_wait();

    /* (1) a_j, warp by warp */
    if (VEC) {
        const int n8 = E / 8;
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
        int jj = warp;
        int s = jj < nj ? slot_of(sel, j0 + jj, n_slots) : -1;
        uint4 gv[FUSED_GU_UNROLL], uv[FUSED_GU_UNROLL];
        const uint4 *g4 = reinterpret_cast<const uint4 *>(gate_up + (size_t)(s < 0 ? 0 : s) * 2 * E);
        gu_first<FUSED_GU_UNROLL>(g4, g4 + n8, s < 0 ? 0 : n8, lane, gv, uv);
        si_pdl_enter();
        for (; jj < nj; jj += FUSED_WARPS) {
            float ga, ua;
            gu_dot<FUSED_GU_UNROLL>(g4, g4 + n8, s < 0 ? 0 : n8, lane, x4, gv, uv, &ga, &ua);
            const int s_cur = s;
            /* the warp's next slot: its first loads go out before the sums */
            const int jn = jj + FUSED_WARPS;
            s = jn < nj ? slot_of(sel, j0 + jn, n_slots) : -1;
            g4 = reinterpret_cast<const uint4 *>(gate_up + (size_t)(s < 0 ? 0 : s) * 2 * E);
            gu_first<FUSED_GU_UNROLL>(g4, g4 + n8, s < 0 ? 0 : n8, lane, gv, uv);
            fused_keep(ga, ua, s_cur, jj, j0, lane, gelu, as, ss, act_out);
        }
    } else {
        si_pdl_enter();
        for (int jj = warp; jj < nj; jj += FUSED_WARPS) {
            const int s = slot_of(sel, j0 + jj, n_slots);
            float ga = 0.0f, ua = 0.0f;
            if (s >= 0) {
                const uint16_t *g = gate_up + (size_t)s * 2 * E, *u = g + E;
                for (int k = lane; k < E; k += 32) {
                    const float xv = __ldg(x + k);
                    ga = fmaf(si_h2f(g[k]), xv, ga);
                    ua = fmaf(si_h2f(u[k]), xv, ua);
                }
            }
            fused_keep(ga, ua, s, jj, j0, lane, gelu, as, ss, act_out);
        }
    }
    __syncthreads();

    /* (2) the block's partial row: sum over its j of a_j down[s_j] */
    float *out = part + (size_t)blockIdx.x * E;
    if (VEC) {
        for (long c0 = 8L * threadIdx.x; c0 < E; c0 += 8L * FUSED_THREADS) {
            float acc[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
            for (int jj = 0; jj < nj; jj += FFN_DOWN_UNROLL) {
                uint4 w[FFN_DOWN_UNROLL];
#pragma unroll
                for (int u = 0; u < FFN_DOWN_UNROLL; u++) {
                    const int s = jj + u < nj ? ss[jj + u] : -1;
                    w[u] = s >= 0 ? __ldcs(reinterpret_cast<const uint4 *>(down + (size_t)s * E + c0))
                                  : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
                for (int u = 0; u < FFN_DOWN_UNROLL; u++) {
                    const float a = jj + u < nj ? as[jj + u] : 0.0f;
                    const __half2 *h = reinterpret_cast<const __half2 *>(&w[u]);
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const float2 f = __half22float2(h[q]);
                        acc[2 * q] = fmaf(a, f.x, acc[2 * q]);
                        acc[2 * q + 1] = fmaf(a, f.y, acc[2 * q + 1]);
                    }
                }
            }
            float4 *o4 = reinterpret_cast<float4 *>(out + c0);
            o4[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            o4[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        }
    } else {
        for (long c = threadIdx.x; c < E; c += FUSED_THREADS) {
            float acc = 0.0f;
            for (int jj = 0; jj < nj; jj++) {
                const int s = ss[jj];
                if (s >= 0)
                    acc = fmaf(as[jj], si_h2f(down[(size_t)s * E + c]), acc);
            }
            out[c] = acc;
        }
    }
}

/* Blocks for k_ffn_fused: bps an SM at most (1 or 2), a warp's worth of
 * slots each at least; *ret_chunk slots a block. */
static int fused_blocks(int n_sm, int bps, int n_sel, int *ret_chunk)
{
    long nb = ((long)n_sel + FUSED_WARPS - 1) / FUSED_WARPS;
    if (nb > (long)n_sm * bps)
        nb = (long)n_sm * bps;
    if (nb < 1)
        nb = 1;
    long chunk = ((long)n_sel + nb - 1) / nb;
    *ret_chunk = (int)chunk;
    return (int)(((long)n_sel + chunk - 1) / chunk);
}

/* How many chunks the down kernel splits the selection into. */
static int down_chunks(int n_sm, int E, int n_sel, int *ret_chunk)
{
    long tiles = ((long)E + FFN_TILE - 1) / FFN_TILE;
    long want = (8L * n_sm + tiles - 1) / tiles; /* ~8 blocks per SM */
    long max_by_len = ((long)n_sel + FFN_MIN_CHUNK - 1) / FFN_MIN_CHUNK;
    long nc = want < max_by_len ? want : max_by_len;
    if (nc > 65535)
        nc = 65535; /* grid.y limit */
    if (nc < 1)
        nc = 1;
    long chunk = ((long)n_sel + nc - 1) / nc;
    chunk = (chunk + FFN_DOWN_UNROLL - 1) / FFN_DOWN_UNROLL * FFN_DOWN_UNROLL;
    nc = ((long)n_sel + chunk - 1) / chunk;
    *ret_chunk = (int)chunk;
    return (int)(nc < 1 ? 1 : nc);
}

/* nm: the FFN's norm to fold into k_ffn_act (si_cuda_norm_ffn checked
 * that it may), x then unread; NULL: x is the normalized row. */
static int ffn_decode(si_cuda *c, const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel, const float *x,
                      float *y, float *act, bool sel_fixed, const si_norm_in *nm)
{
    const int E = w->n_embd;
    int chunk;
    if (c->ffn_decode == SI_FFN_DECODE_FUSED && !nm) {
        /* variant 2, where a block's list fits shared memory */
        const int nb = fused_blocks(c->n_sm, c->ffn_fused_bps, n_sel, &chunk);
        const size_t shm = (size_t)chunk * (sizeof(float) + sizeof(int));
        if (shm <= 48 * 1024) {
            const bool vec = E % 8 == 0 && (uintptr_t)w->gate_up % 16 == 0 && (uintptr_t)w->down % 16 == 0 &&
                             (uintptr_t)x % 16 == 0 && (nb > 1 || (uintptr_t)y % 16 == 0);
            float *part = y;
            if (nb > 1) {
                void *p;
                int r = si_cuda__scratch(c, si_align256((size_t)nb * E * sizeof(float)), &p);
                if (r < 0)
                    return r;
                part = (float *)p;
            }
            SI_LAUNCH("k_ffn_fused", c, vec ? k_ffn_fused<true> : k_ffn_fused<false>, (unsigned)nb, FUSED_THREADS,
                      shm, w->gate_up, w->down, E, w->n_slots, sel, n_sel, x, chunk, part, act, w->gelu,
                      sel_fixed ? 1 : 0);
            if (nb > 1)
                SI_LAUNCH("k_ffn_reduce", c, k_ffn_reduce, (unsigned)(((long)E + 31) / 32), FFN_THREADS, 0,
                          (const float *)part, nb, E, y);
            return 0;
        }
    }
    int nc = down_chunks(c->n_sm, E, n_sel, &chunk);
    const bool gu_pairs = c->ffn_decode == SI_FFN_DECODE_GEMV;
    /* k_ffn_act's a_j go to the caller's act, or scratch; k_ffn_gu's pairs
     * always to scratch */
    size_t act_b = gu_pairs ? si_align256((size_t)2 * n_sel * sizeof(float))
                   : act           ? 0
                                   : si_align256((size_t)n_sel * sizeof(float));
    size_t part_b = nc > 1 ? si_align256((size_t)nc * E * sizeof(float)) : 0;
    char *scr = NULL;
    if (act_b + part_b) {
        void *p;
        int r = si_cuda__scratch(c, act_b + part_b, &p);
        if (r < 0)
            return r;
        scr = (char *)p;
    }
    float *a = act && !gu_pairs ? act : (float *)scr;
    float *part = nc > 1 ? (float *)(scr + act_b) : y;

    bool vec_act = E % 8 == 0 && (uintptr_t)w->gate_up % 16 == 0 && (uintptr_t)x % 16 == 0;
    const bool gu = c->ffn_decode == SI_FFN_DECODE_GEMV;
    if (gu) {
        const long rows = 2L * n_sel;
        const int wpr = gemv_wpr(rows, E, c->n_sm);
        const unsigned g1 = (unsigned)((rows + GEMV_WARPS / wpr - 1) / (GEMV_WARPS / wpr));
        const int pre = sel_fixed ? 1 : 0;
#define SI_GU(W)                                                                               \
    SI_LAUNCH("k_ffn_gu", c, vec_act ? k_ffn_gu<W, true> : k_ffn_gu<W, false>, g1, GEMV_THREADS, 0, \
              w->gate_up, E, w->n_slots, sel, n_sel, x, a, pre)
        if (wpr == 1)
            SI_GU(1);
        else if (wpr == 2)
            SI_GU(2);
        else if (wpr == 4)
            SI_GU(4);
        else
            SI_GU(8);
#undef SI_GU
    } else if (nm) {
        unsigned g1 = (unsigned)(((long)n_sel + FFN_WARPS - 1) / FFN_WARPS);
        SI_LAUNCH("k_ffn_act_norm", c, k_ffn_act_norm<4>, g1, FFN_THREADS, (size_t)E * sizeof(float), w->gate_up,
                  E, w->n_slots, sel, n_sel, a, w->gelu, *nm);
    } else {
        unsigned g1 = (unsigned)(((long)n_sel + FFN_WARPS - 1) / FFN_WARPS);
        if (c->ffn_act_unroll == 8)
            SI_LAUNCH("k_ffn_act", c, vec_act ? k_ffn_act<true, 8> : k_ffn_act<false, 8>, g1, FFN_THREADS, 0,
                      w->gate_up, E, w->n_slots, sel, n_sel, x, a, w->gelu, sel_fixed ? 1 : 0);
        else
            SI_LAUNCH("k_ffn_act", c, vec_act ? k_ffn_act<true, 4> : k_ffn_act<false, 4>, g1, FFN_THREADS, 0,
                      w->gate_up, E, w->n_slots, sel, n_sel, x, a, w->gelu, sel_fixed ? 1 : 0);
    }

    dim3 g2((unsigned)(((long)E + FFN_TILE - 1) / FFN_TILE), (unsigned)nc);
    bool vec_down = E % 4 == 0 && (uintptr_t)w->down % 8 == 0;
    /* with the pairs in scratch, the caller's act (if any) is written by the down kernel */
    float *act_out = gu ? act : NULL;
    if (gu)
        SI_LAUNCH("k_ffn_down", c, vec_down ? k_ffn_down<true, true> : k_ffn_down<false, true>, g2, FFN_THREADS,
                  0, w->down, E, w->n_slots, sel, n_sel, (const float *)a, chunk, part, w->gelu, act_out);
    else
        SI_LAUNCH("k_ffn_down", c, vec_down ? k_ffn_down<true, false> : k_ffn_down<false, false>, g2,
                  FFN_THREADS, 0, w->down, E, w->n_slots, sel, n_sel, (const float *)a, chunk, part, w->gelu,
                  act_out);

    if (nc > 1) {
        SI_LAUNCH("k_ffn_reduce", c, k_ffn_reduce, (unsigned)(((long)E + 31) / 32), FFN_THREADS, 0,
                  (const float *)part, nc, E, y);
    }
    return 0;
}

/* ---- prefill ---- */

/* dst[i][0..row) = src[s_i][0..row) for i < n, s_i = slot_of(sel, j0 + i);
 * zeros for slots out of range. */
__global__ void k_gather_rows(const uint16_t *__restrict__ src, long row, int n_slots,
                              const int32_t *__restrict__ sel, long j0, int n,
                              uint16_t *__restrict__ dst)
{
    const long total = (long)n * row;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long)gridDim.x * blockDim.x) {
        long i = idx / row, e = idx % row;
        int s = slot_of(sel, j0 + i, n_slots);
        dst[idx] = s >= 0 ? src[(size_t)s * row + e] : (uint16_t)0;
    }
}

/* a[t][jj] = act(H[t][2jj]) * H[t][2jj+1] for jj < nc: into A16 [t][nc] and,
 * when act, act[t * n_sel + j0 + jj]. */
__global__ void k_ffn_glu(const float *__restrict__ H, int n_tokens, int nc, __half *__restrict__ A16,
                          float *__restrict__ act, int n_sel, int j0, int gelu)
{
    const long total = (long)n_tokens * nc;
    for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long)gridDim.x * blockDim.x) {
        long t = idx / nc, jj = idx % nc;
        float g = H[(size_t)t * 2 * nc + 2 * jj], u = H[(size_t)t * 2 * nc + 2 * jj + 1];
        float a = si_act(g, gelu) * u;
        A16[idx] = __float2half_rn(a);
        if (act)
            act[(size_t)t * n_sel + j0 + jj] = a;
    }
}

struct prefill_layout {
    size_t x16, gu, dn, h, a16, total;
};

static prefill_layout prefill_plan(int E, int n_sel, int n_tokens, bool gather)
{
    prefill_layout L;
    size_t nc = (size_t)(n_sel < FFN_SLOT_CHUNK ? n_sel : FFN_SLOT_CHUNK);
    L.x16 = 0;
    L.gu = L.x16 + si_align256((size_t)n_tokens * E * sizeof(__half));
    L.dn = L.gu + (gather ? si_align256(nc * 2 * E * sizeof(__half)) : 0);
    L.h = L.dn + (gather ? si_align256(nc * E * sizeof(__half)) : 0);
    L.a16 = L.h + si_align256((size_t)n_tokens * 2 * nc * sizeof(float));
    L.total = L.a16 + si_align256((size_t)n_tokens * nc * sizeof(__half));
    return L;
}

static int ffn_prefill(si_cuda *c, const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel, const float *x,
                       float *y, int n_tokens, float *act)
{
    const int E = w->n_embd;
    /* all slots 0..n_sel-1 and all of them exist: the weights are used in place */
    const bool gather = sel || n_sel > w->n_slots;
    prefill_layout L = prefill_plan(E, n_sel, n_tokens, gather);
    void *p;
    int r = si_cuda__scratch(c, L.total, &p);
    if (r < 0)
        return r;
    char *scr = (char *)p;
    __half *x16 = (__half *)(scr + L.x16), *gu16 = (__half *)(scr + L.gu);
    __half *dn16 = (__half *)(scr + L.dn), *A16 = (__half *)(scr + L.a16);
    float *H = (float *)(scr + L.h);

    if ((r = si_cuda__to_f16(c, x, x16, (long)n_tokens * E)) < 0)
        return r;
    for (int j0 = 0; j0 < n_sel; j0 += FFN_SLOT_CHUNK) {
        const int nc = n_sel - j0 < FFN_SLOT_CHUNK ? n_sel - j0 : FFN_SLOT_CHUNK;
        const __half *gu, *dn;
        if (gather) {
            long n1 = (long)nc * 2 * E, n2 = (long)nc * E;
            k_gather_rows<<<si_grid(n1, 256, 65535), 256, 0, c->stream>>>(
                w->gate_up, 2L * E, w->n_slots, sel, j0, nc, (uint16_t *)gu16);
            SI_LAUNCH_CHECK("k_gather_rows");
            k_gather_rows<<<si_grid(n2, 256, 65535), 256, 0, c->stream>>>(
                w->down, E, w->n_slots, sel, j0, nc, (uint16_t *)dn16);
            SI_LAUNCH_CHECK("k_gather_rows");
            gu = gu16;
            dn = dn16;
        } else {
            gu = (const __half *)w->gate_up + (size_t)j0 * 2 * E;
            dn = (const __half *)w->down + (size_t)j0 * E;
        }
        /* H [T][2nc] = x [T][E] . GU [2nc][E]^T */
        if ((r = si_cuda__gemm_f16(c, true, 2 * nc, n_tokens, E, gu, E, x16, E, 0.0f, H, 2 * nc)) < 0)
            return r;
        long na = (long)n_tokens * nc;
        k_ffn_glu<<<si_grid(na, 256, 65535), 256, 0, c->stream>>>(H, n_tokens, nc, A16, act, n_sel, j0,
                                                                   w->gelu);
        SI_LAUNCH_CHECK("k_ffn_glu");
        /* y [T][E] (+)= A [T][nc] . DN [nc][E]: column-major y^T = DN^T-as-(E x nc) . A^T */
        if ((r = si_cuda__gemm_f16(c, false, E, n_tokens, nc, dn, E, A16, nc, j0 == 0 ? 0.0f : 1.0f,
                                   y, E)) < 0)
            return r;
    }
    return 0;
}

extern "C" size_t si_cuda_ffn_scratch(int n_sm, const si_cuda_ffn_weights *w, int n_sel, int n_tokens)
{
    if (!w || w->n_embd <= 0 || n_sel <= 0 || n_tokens <= 0)
        return 0;
    if (n_tokens > 1)
        return prefill_plan(w->n_embd, n_sel, n_tokens, true).total;
    int chunk;
    int nc = down_chunks(n_sm > 0 ? n_sm : 1, w->n_embd, n_sel, &chunk);
    /* room for k_ffn_gu's pairs ("ffn_decode" variant 1) */
    size_t need = si_align256((size_t)2 * n_sel * sizeof(float)) +
                  (nc > 1 ? si_align256((size_t)nc * w->n_embd * sizeof(float)) : 0);
    /* and for k_ffn_fused's partial rows (variant 2, 2 blocks an SM at most) */
    int fchunk;
    const int nb = fused_blocks(n_sm > 0 ? n_sm : 1, 2, n_sel, &fchunk);
    const size_t fused = nb > 1 ? si_align256((size_t)nb * w->n_embd * sizeof(float)) : 0;
    return need > fused ? need : fused;
}

int si_cuda__ffn(si_cuda *c, const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel, const float *x,
                 float *y, int n_tokens, float *act, bool sel_fixed)
{
    SI_ARG_CHECK(c && w && n_sel >= 0 && n_tokens >= 0 && w->n_embd >= 0 && w->n_slots >= 0);
    if (n_tokens == 0 || w->n_embd == 0)
        return 0;
    SI_ARG_CHECK(x && y);
    if (n_sel == 0) {
        SI_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n_tokens * w->n_embd * sizeof(float), c->stream));
        return 0;
    }
    SI_ARG_CHECK(w->n_slots == 0 || (w->gate_up && w->down));
    if (w->n_slots == 0) {
        /* every slot is out of range: a = 0, y = 0 */
        SI_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n_tokens * w->n_embd * sizeof(float), c->stream));
        if (act)
            SI_CUDA_CHECK(cudaMemsetAsync(act, 0, (size_t)n_tokens * n_sel * sizeof(float), c->stream));
        return 0;
    }
    if (n_tokens == 1)
        return ffn_decode(c, w, sel, n_sel, x, y, act, sel_fixed, NULL);
    return ffn_prefill(c, w, sel, n_sel, x, y, n_tokens, act);
}

extern "C" int si_cuda_ffn(si_cuda *c, const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel,
                           const float *x, float *y, int n_tokens, float *act)
{
    return si_cuda__ffn(c, w, sel, n_sel, x, y, n_tokens, act, true);
}

extern "C" int si_cuda_norm_ffn(si_cuda *c, float *x, const float *res, const float *nw, float eps, float *xn,
                                const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel, float *y)
{
    SI_ARG_CHECK(c && x && xn && y && w && n_sel >= 0 && w->n_embd > 0 && w->n_slots >= 0);
    const si_norm_in nm = { x, res, nw, eps, xn, c->done + SI_CUDA_DONE_NORM, w->n_embd };
    if (c->norm_fold && c->ffn_decode == SI_FFN_DECODE_WARP && si_norm_foldable(nm) && n_sel > 0 &&
        w->n_slots > 0 && w->gate_up && w->down && (uintptr_t)w->gate_up % 16 == 0)
        return ffn_decode(c, w, sel, n_sel, xn, y, NULL, true, &nm);
    /* the norm's kernel, then the FFN's */
    const int r = si_norm_kernel(c, nm);
    return r < 0 ? r : si_cuda__ffn(c, w, sel, n_sel, xn, y, 1, NULL, true);
}
