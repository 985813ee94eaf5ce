/* Elementwise ops: embedding rows, residual add, f32 <-> f16. Grid-stride
 * loops, so any n fits a bounded grid. */
#include "si-cuda-impl.cuh"

enum { EW_THREADS = 256, EW_MAX_BLOCKS = 65535 };

/* One block row per token (grid.y may be small: tokens loop over grid.y). */
__global__ void k_get_rows(const void *__restrict__ table, int f16, int rows, int cols,
                           const int32_t *__restrict__ ids, int n, float *__restrict__ out)
{
    for (int t = blockIdx.y; t < n; t += gridDim.y) {
        int id = ids[t];
        bool ok = id >= 0 && id < rows;
        float *o = out + (size_t)t * cols;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < cols; i += gridDim.x * blockDim.x) {
            float v = 0.0f;
            if (ok) {
                size_t off = (size_t)id * cols + i;
                v = f16 ? si_h2f(((const uint16_t *)table)[off]) : ((const float *)table)[off];
            }
            o[i] = v;
        }
    }
}

extern "C" int si_cuda_get_rows(si_cuda *c, const void *table, bool f16, int rows, int cols,
                                const int32_t *ids, int n, float *out)
{
    SI_ARG_CHECK(c && rows >= 0 && cols >= 0 && n >= 0);
    if (n == 0 || cols == 0)
        return 0;
    SI_ARG_CHECK(table && ids && out);
    dim3 grid(si_grid(cols, EW_THREADS, 64), n < EW_MAX_BLOCKS ? n : EW_MAX_BLOCKS);
    k_get_rows<<<grid, EW_THREADS, 0, c->stream>>>(table, f16 ? 1 : 0, rows, cols, ids, n, out);
    SI_LAUNCH_CHECK("k_get_rows");
    return 0;
}

__global__ void k_add(float *y, const float *x, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] += x[i];
}

extern "C" int si_cuda_add(si_cuda *c, float *y, const float *x, long n)
{
    SI_ARG_CHECK(c && n >= 0);
    if (n == 0)
        return 0;
    SI_ARG_CHECK(y && x);
    k_add<<<si_grid(n, EW_THREADS, 4 * 65535), EW_THREADS, 0, c->stream>>>(y, x, n);
    SI_LAUNCH_CHECK("k_add");
    return 0;
}

__global__ void k_scale(float *__restrict__ x, float f, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        x[i] *= f;
}

extern "C" int si_cuda_scale(si_cuda *c, float *x, float f, long n)
{
    SI_ARG_CHECK(c && n >= 0);
    if (n == 0)
        return 0;
    SI_ARG_CHECK(x);
    k_scale<<<si_grid(n, EW_THREADS, 4 * 65535), EW_THREADS, 0, c->stream>>>(x, f, n);
    SI_LAUNCH_CHECK("k_scale");
    return 0;
}

__global__ void k_softcap(float *__restrict__ x, float cap, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        x[i] = cap * tanhf(x[i] / cap);
}

extern "C" int si_cuda_softcap(si_cuda *c, float *x, float cap, long n)
{
    SI_ARG_CHECK(c && n >= 0 && cap > 0.0f);
    if (n == 0)
        return 0;
    SI_ARG_CHECK(x);
    k_softcap<<<si_grid(n, EW_THREADS, 4 * 65535), EW_THREADS, 0, c->stream>>>(x, cap, n);
    SI_LAUNCH_CHECK("k_softcap");
    return 0;
}

__global__ void k_store_f16(const float *__restrict__ src, uint16_t *__restrict__ dst, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        dst[i] = si_f2h(src[i]);
}

extern "C" int si_cuda_store_f16(si_cuda *c, const float *src, uint16_t *dst, long n)
{
    SI_ARG_CHECK(c && n >= 0);
    if (n == 0)
        return 0;
    SI_ARG_CHECK(src && dst);
    k_store_f16<<<si_grid(n, EW_THREADS, 4 * 65535), EW_THREADS, 0, c->stream>>>(src, dst, n);
    SI_LAUNCH_CHECK("k_store_f16");
    return 0;
}

/* rows *pos .. *pos + n_rows - 1 of dst [][row] = f16(src [n_rows][row]) */
__global__ void k_store_rows_at(const float *__restrict__ src, uint16_t *__restrict__ dst,
                                long row, const int32_t *__restrict__ pos, long n)
{
    uint16_t *d = dst + (size_t)*pos * row;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        d[i] = si_f2h(src[i]);
}

extern "C" int si_cuda_store_rows_at(si_cuda *c, const float *src, uint16_t *dst, long row,
                                     const int32_t *pos_dev, int n_rows)
{
    SI_ARG_CHECK(c && row >= 0 && n_rows >= 0);
    long n = row * n_rows;
    if (n == 0)
        return 0;
    SI_ARG_CHECK(src && dst && pos_dev);
    k_store_rows_at<<<si_grid(n, EW_THREADS, 4 * 65535), EW_THREADS, 0, c->stream>>>(
        src, dst, row, pos_dev, n);
    SI_LAUNCH_CHECK("k_store_rows_at");
    return 0;
}

/* LFM2's short convolution (engine/backend.h shortconv), one thread per
 * token and channel: the batch's own positions from b and x, earlier ones
 * from the cache's ring (position p at row p % rows), which each thread's
 * row joins; pos0 from *pos when pos is not NULL (a decode graph). */
__global__ void k_shortconv(const float *__restrict__ b, const float *__restrict__ c,
                            const float *__restrict__ x, const float *__restrict__ w, int len,
                            float *__restrict__ cache, int pos0, int rows,
                            const int32_t *__restrict__ pos, int n_tokens, int n,
                            float *__restrict__ out)
{
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const int t = blockIdx.y;
    if (i >= n || t >= n_tokens)
        return;
    const int p0 = pos ? *pos : pos0;
    float sum = 0.0f;
    for (int k = 0; k < len; k++) {
        const int p = p0 + t - len + 1 + k;
        if (p < 0)
            continue;
        const float v = p >= p0 ? b[(size_t)(p - p0) * n + i] * x[(size_t)(p - p0) * n + i]
                                : cache[(size_t)(p % rows) * n + i];
        sum += w[(size_t)i * len + k] * v;
    }
    cache[(size_t)((p0 + t) % rows) * n + i] = b[(size_t)t * n + i] * x[(size_t)t * n + i];
    out[(size_t)t * n + i] = c[(size_t)t * n + i] * sum;
}

extern "C" int si_cuda_shortconv(si_cuda *c, const float *b, const float *cg, const float *x,
                                 const float *w, int len, float *cache, int pos0, int rows,
                                 const int32_t *pos_dev, int n_tokens, int n, float *out)
{
    SI_ARG_CHECK(c && len >= 1 && pos0 >= 0 && n_tokens >= 0 && n >= 0 && n_tokens <= 65535 &&
                 len - 1 + n_tokens <= rows);
    if (n_tokens == 0 || n == 0)
        return 0;
    SI_ARG_CHECK(b && cg && x && w && cache && out);
    const dim3 grid((unsigned)((n + EW_THREADS - 1) / EW_THREADS), (unsigned)n_tokens);
    k_shortconv<<<grid, EW_THREADS, 0, c->stream>>>(b, cg, x, w, len, cache, pos0, rows, pos_dev,
                                                    n_tokens, n, out);
    SI_LAUNCH_CHECK("k_shortconv");
    return 0;
}

__global__ void k_to_f32(const uint16_t *__restrict__ src, float *__restrict__ dst, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        dst[i] = si_h2f(src[i]);
}

extern "C" int si_cuda_to_f32(si_cuda *c, const uint16_t *src, float *dst, long n)
{
    SI_ARG_CHECK(c && n >= 0);
    if (n == 0)
        return 0;
    SI_ARG_CHECK(src && dst);
    k_to_f32<<<si_grid(n, EW_THREADS, 4 * 65535), EW_THREADS, 0, c->stream>>>(src, dst, n);
    SI_LAUNCH_CHECK("k_to_f32");
    return 0;
}

/* ---- decode's L2 prefetch (si_cuda_prefetch) ---- */

enum {
    PF_SPANS = 4,
    PF_THREADS = 128,
    PF_CHUNK = 16384, /* bytes a prefetch instruction asks for */
};

/* Ranges 16-byte aligned and multiples of 16 long (the instruction's
 * rule), already cut to the budget; unused spans 0 bytes. */
struct pf_args {
    const char *p[PF_SPANS];
    unsigned long long bytes[PF_SPANS];
    const char *gate_up; /* the FFN's slots, or NULL */
    const int32_t *sel;  /* NULL: slots 0 .. n_sel - 1 */
    int n_sel;           /* slots to prefetch */
    int n_slots;
    unsigned slot_bytes; /* a slot's gate and up rows */
};

__device__ __forceinline__ void pf_l2(const char *p, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

/* Thread u asks for unit u, u + threads, ...: the spans' chunks in order,
 * then the slots. The trigger comes first, so the next kernel launches at
 * once (this one holds a few small blocks); the prefetches need nothing
 * the kernels before write (sel included: the caller says so), and the
 * wait at the end keeps this kernel from ending before them, so the
 * kernel after, which waits for this one, still sees their writes. */
__global__ void __launch_bounds__(PF_THREADS) k_l2_prefetch(pf_args a)
{
    si_pdl_trigger();
    const long nt = (long)gridDim.x * blockDim.x;
    long u = (long)blockIdx.x * blockDim.x + threadIdx.x, base = 0;
#pragma unroll
    for (int i = 0; i < PF_SPANS; i++) { /* constant indices: a.p stays in the parameter space */
        const long nc = (long)((a.bytes[i] + PF_CHUNK - 1) / PF_CHUNK);
        for (; u < base + nc; u += nt) {
            const unsigned long long off = (unsigned long long)(u - base) * PF_CHUNK;
            const unsigned long long left = a.bytes[i] - off;
            pf_l2(a.p[i] + off, (unsigned)(left < PF_CHUNK ? left : PF_CHUNK));
        }
        base += nc;
    }
    for (; u < base + a.n_sel; u += nt) {
        const long j = u - base;
        const long s = a.sel ? (long)a.sel[j] : j;
        if (s >= 0 && s < a.n_slots)
            pf_l2(a.gate_up + (size_t)s * a.slot_bytes, a.slot_bytes);
    }
    si_pdl_wait();
}

extern "C" int si_cuda_prefetch(si_cuda *c, const void *const *p, const size_t *bytes, int n,
                                const si_cuda_ffn_weights *ffn, const int32_t *sel, int n_sel)
{
    SI_ARG_CHECK(c && n >= 0 && n <= PF_SPANS && n_sel >= 0 && (n == 0 || (p && bytes)));
    /* cp.async.bulk.prefetch is Hopper's (sm_90); Jetson Orin's L2 is 4 MB */
    if (!c->pdl_ok || c->l2_prefetch == 0 || c->l2_bytes == 0)
        return 0;
    size_t budget = c->l2_bytes / 100 * (size_t)c->l2_prefetch;
    pf_args a = {};
    long units = 0;
    for (int i = 0; i < n; i++) {
        if (!p[i] || bytes[i] == 0)
            continue;
        const uintptr_t b = ((uintptr_t)p[i] + 15) & ~(uintptr_t)15;
        const uintptr_t e = ((uintptr_t)p[i] + bytes[i]) & ~(uintptr_t)15;
        size_t len = e > b ? e - b : 0;
        if (len > budget)
            len = budget & ~(size_t)15;
        budget -= len;
        a.p[i] = (const char *)b;
        a.bytes[i] = len;
        units += (long)((len + PF_CHUNK - 1) / PF_CHUNK);
    }
    const size_t sb = ffn ? 4 * (size_t)ffn->n_embd : 0; /* two rows of f16 */
    if (ffn && ffn->gate_up && n_sel > 0 && sb > 0 && sb % 16 == 0 && sb <= 0xffffffffu &&
        (uintptr_t)ffn->gate_up % 16 == 0) {
        const size_t k = budget / sb;
        a.gate_up = (const char *)ffn->gate_up;
        a.sel = sel;
        a.n_sel = k < (size_t)n_sel ? (int)k : n_sel;
        a.n_slots = ffn->n_slots;
        a.slot_bytes = (unsigned)sb;
        units += a.n_sel;
    }
    if (units == 0)
        return 0;
    SI_LAUNCH("k_l2_prefetch", c, k_l2_prefetch, si_grid(units, PF_THREADS, (unsigned)c->n_sm),
              PF_THREADS, 0, a);
    return 0;
}
