/* The CUDA backend's entry points in a build without CUDA (-Dcuda=disabled,
 * or no toolkit found): callers link the same names and learn why at run
 * time. */
#include "backend.h"

#include <errno.h>
#include <stdio.h>

int eng_backend_cuda_new(int device, eng_backend **ret_backend, eng_error *err)
{
    if (err)
        snprintf(err->msg, sizeof(err->msg), "built without CUDA support (meson -Dcuda=enabled)");
    return -ENOTSUP;
}

int eng_backend_cuda_describe(const eng_backend *be, char *name, size_t name_size,
                              bool *integrated, double *peak_gbps)
{
    return -ENOTSUP;
}

int eng__backend_graph_stats(const eng_backend *be, eng_graph_stats *ret)
{
    return -EINVAL;
}
