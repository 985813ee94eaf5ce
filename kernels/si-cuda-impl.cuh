/* Internals shared by the kernel files: the context, error macros, f16 and
 * reduction helpers. Not part of the API (si-cuda.h). */
#ifndef SI_CUDA_IMPL_CUH
#define SI_CUDA_IMPL_CUH

#include <errno.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "si-cuda.h"

struct si_cuda {
    int device;
    int n_sm;
    bool integrated;
    cudaStream_t own_stream; /* created here */
    cudaStream_t stream;     /* where ops go: own_stream or the caller's */
    cublasHandle_t blas;
    void *scratch;           /* device, grows with si_cuda_reserve */
    size_t scratch_size;
    int n_graphs;            /* live graphs: they hold scratch pointers, so no growth */
    bool pdl_ok;             /* compute capability 9.0 or later */
    bool pdl;                /* launch decode kernels with programmatic dependence */
    int ffn_act_unroll;      /* kernel variants (si_cuda_set_variant) */
    int ffn_decode;          /* SI_FFN_DECODE_* */
    int ffn_fused_bps;       /* k_ffn_fused's blocks an SM at most: 1 or 2 */
    bool attn_combine;       /* the decode attention combines its splits itself */
    int l2_prefetch;         /* si_cuda_prefetch's share of the L2 in percent (0: off) */
    bool norm_fold;          /* si_cuda_norm_gemv: the norm inside the GEMV's blocks */
    size_t l2_bytes;         /* the device's L2 cache */
    unsigned *done;          /* device, SI_CUDA_DONE_ALL zeroes: per-KV-head counters
                              * of that variant, then k_argmax's, k_gemv_norm's; each
                              * back to 0 after its use */
    float *argmax_v;         /* device, ARGMAX_BLOCKS: k_argmax's blocks' best */
    int *argmax_i;
};

enum {
    SI_CUDA_DONE_COUNTERS = 1024,
    SI_CUDA_DONE_ARGMAX = SI_CUDA_DONE_COUNTERS, /* k_argmax's counter in done */
    SI_CUDA_DONE_NORM,                           /* k_gemv_norm's */
    SI_CUDA_DONE_ALL,                            /* counters in done */
    ARGMAX_BLOCKS = 128,
};

/* Record an error (printf format) in the thread-local string; returns code. */
int si_cuda__fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int si_cuda__fail_cuda(cudaError_t e, const char *stmt, const char *file, int line);
int si_cuda__fail_blas(cublasStatus_t s, const char *stmt, const char *file, int line);

/* Statement checks that return the error code from the enclosing function. */
#define SI_CUDA_CHECK(stmt)                                                                  \
    do {                                                                                     \
        cudaError_t e_ = (stmt);                                                             \
        if (e_ != cudaSuccess)                                                               \
            return si_cuda__fail_cuda(e_, #stmt, __FILE__, __LINE__);                        \
    } while (0)

#define SI_CUBLAS_CHECK(stmt)                                                                \
    do {                                                                                     \
        cublasStatus_t s_ = (stmt);                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                     \
            return si_cuda__fail_blas(s_, #stmt, __FILE__, __LINE__);                        \
    } while (0)

/* After a <<<>>> launch: configuration errors show up here at once; faults
 * inside the kernel show up at the next synchronizing call. */
#define SI_LAUNCH_CHECK(name)                                                                \
    do {                                                                                     \
        cudaError_t e_ = cudaGetLastError();                                                 \
        if (e_ != cudaSuccess)                                                               \
            return si_cuda__fail_cuda(e_, "launch of " name, __FILE__, __LINE__);            \
    } while (0)

#define SI_ARG_CHECK(cond)                                                                   \
    do {                                                                                     \
        if (!(cond))                                                                         \
            return si_cuda__fail(-EINVAL, "invalid argument: %s at %s:%d", #cond, __FILE__,  \
                                 __LINE__);                                                  \
    } while (0)

/* How a decode FFN runs (the "ffn_decode" variant, ffn.cu): k_ffn_act then
 * k_ffn_down; the gate/up rows as one GEMV's (k_ffn_gu) then k_ffn_down;
 * one pass (k_ffn_fused). */
enum { SI_FFN_DECODE_WARP = 0, SI_FFN_DECODE_GEMV = 1, SI_FFN_DECODE_FUSED = 2 };

/* Launch through cudaLaunchKernelEx, with programmatic dependent launch
 * when c->pdl (Hopper and later): the kernel may start while the one before
 * it in the stream is still running, once that one's blocks have all called
 * si_pdl_trigger (or exited). A kernel launched so must call si_pdl_wait
 * before it reads anything an earlier kernel writes, and before it writes
 * anything; before the wait it may only read what no kernel of the step
 * writes (weights). The decode step is a chain of short kernels (about ten
 * a layer) whose launch, ramp and tail are otherwise dead time between them:
 * with this, a GEMV's weight loads are issued during the previous kernel's
 * tail. Returns the launch's error (and clears it from cudaGetLastError). */
template <typename... KArgs, typename... Args>
static inline cudaError_t si_launch(const si_cuda *c, void (*kernel)(KArgs...), dim3 grid, dim3 block,
                                    size_t shm, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shm;
    cfg.stream = c->stream;
    cfg.attrs = attr;
    cfg.numAttrs = c->pdl ? 1 : 0;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, ((KArgs)args)...);
    if (e != cudaSuccess)
        (void)cudaGetLastError();
    return e;
}

#define SI_LAUNCH(name, ...)                                                                 \
    do {                                                                                     \
        cudaError_t e_ = si_launch(__VA_ARGS__);                                             \
        if (e_ != cudaSuccess)                                                               \
            return si_cuda__fail_cuda(e_, "launch of " name, __FILE__, __LINE__);            \
    } while (0)

/* Scratch of at least `bytes`, 256-byte aligned; grows (synchronizing) when
 * too small, which fails with an error during graph capture. */
int si_cuda__scratch(si_cuda *c, size_t bytes, void **ret);

/* cuBLAS f16 x f16 -> f32 (matmul.cu): y (ldc) = op(a) b + beta y, column-major. */
int si_cuda__gemm_f16(si_cuda *c, bool trans_a, int m, int n, int k, const __half *a, int lda,
                      const __half *b, int ldb, float beta, float *y, int ldc);
/* si_cuda_ffn; sel_fixed: no kernel of the step writes sel (a plan's
 * selection, or NULL), so its weights may be loaded before the wait of
 * si_launch (ffn.cu). */
int si_cuda__ffn(si_cuda *c, const si_cuda_ffn_weights *w, const int32_t *sel, int n_sel, const float *x,
                 float *y, int n_tokens, float *act, bool sel_fixed);
/* dst[i] = f16(src[i]) on the context's stream (matmul.cu). */
int si_cuda__to_f16(si_cuda *c, const float *src, __half *dst, long n);

/* Scratch carving: each piece rounded up to 256 bytes. */
static inline size_t si_align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* Grid size for n elements, `per_block` per block, capped for grid-stride loops. */
static inline unsigned si_grid(long n, int per_block, unsigned cap)
{
    long g = (n + per_block - 1) / per_block;
    if (g < 1)
        g = 1;
    return g > (long)cap ? cap : (unsigned)g;
}

/* ---- device helpers ---- */

/* Programmatic dependent launch (si_launch): wait for the kernels before
 * this one to finish and their writes to be visible; then let the next
 * kernel's blocks start. No-ops before sm_90 and in a kernel launched
 * without the attribute. The trigger comes after the wait, so at most one
 * kernel waits ahead of the running one. */
__device__ __forceinline__ void si_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void si_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Both, in a kernel that has nothing to load before the wait. */
__device__ __forceinline__ void si_pdl_enter()
{
    si_pdl_wait();
    si_pdl_trigger();
}

__device__ __forceinline__ float si_h2f(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t si_f2h(float f)
{
    return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float si_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float si_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* RMSNorm's sum of squares, kept in double as the CPU reference does
 * (ggml_float): norm.cu, and the GEMV that folds the norm in (gemv.cu). */
__device__ __forceinline__ double warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* the block's sum of s, in every thread (blockDim.x a multiple of 32) */
__device__ __forceinline__ double block_sum_d(double s, double *red)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    s = warp_sum_d(s);
    if (lane == 0)
        red[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / 32) ? red[lane] : 0.0;
        s = warp_sum_d(s);
        if (lane == 0)
            red[0] = s;
    }
    __syncthreads();
    return red[0];
}

__device__ __forceinline__ double sq4(float4 v)
{
    return (double)(v.x * v.x) + (double)(v.y * v.y) + (double)(v.z * v.z) + (double)(v.w * v.w);
}

/* Dot of 8 halves (one uint4) with 8 floats (two float4). */
__device__ __forceinline__ float si_dot8(uint4 w, float4 xa, float4 xb, float acc)
{
    const __half2 *h = reinterpret_cast<const __half2 *>(&w);
    float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
    float2 f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
    acc = fmaf(f0.x, xa.x, acc);
    acc = fmaf(f0.y, xa.y, acc);
    acc = fmaf(f1.x, xa.z, acc);
    acc = fmaf(f1.y, xa.w, acc);
    acc = fmaf(f2.x, xb.x, acc);
    acc = fmaf(f2.y, xb.y, acc);
    acc = fmaf(f3.x, xb.z, acc);
    acc = fmaf(f3.y, xb.w, acc);
    return acc;
}

/* The FFN gate's activation (eng_act), both g * sigmoid(z): silu (z = g)
 * or GELU's tanh form (gelu: z = 1.5957691 (g + 0.044715 g^3)), as the CPU
 * backend's gate_act. */
__device__ __forceinline__ float si_act(float g, int gelu)
{
    const float z = gelu ? g * fmaf(1.5957691216057308f * 0.044715f, g * g, 1.5957691216057308f) : g;
    return g / (1.0f + expf(-z));
}

#endif
