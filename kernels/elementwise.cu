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
