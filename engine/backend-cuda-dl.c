/* The CUDA backend's entry points in a build with CUDA: the backend itself
 * (backend-cuda.c, the kernels, cudart and cuBLAS) is a module,
 * libselectinfer-cuda.so, opened the first time a CUDA backend is asked
 * for. Linking cuBLAS makes every process 150 MiB larger before main()
 * (its libraries' initialisers), CPU-only runs too; opened here, it costs
 * nothing until a GPU is used, and a failed attempt (no GPU, no driver)
 * closes the module again, which gives that memory back.
 *
 * Where the module is looked for: SI_CUDA_MODULE (a path) if set, else
 * the build tree's copy (ENG_CUDA_MODULE_BUILD, where it exists), else the
 * installed one (ENG_CUDA_MODULE_INSTALL). No module is -ENOENT, a module
 * of another build (eng_cuda_module's abi differs) -ENOEXEC, not called:
 * a broken install, not a machine without a GPU (-ENODEV), so tests that
 * skip without a GPU fail on these.
 */
#include "backend.h"
#include "error.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *handle;                /* the open module, or NULL */
static const eng_cuda_module *mod;  /* its entry points */
static bool kept;                   /* a backend came from it: never closed */

/* The module's path: the first of the candidates that exists. */
static const char *module_path(void)
{
    const char *env = getenv("SI_CUDA_MODULE");
    if (env && *env)
        return env;
    if (access(ENG_CUDA_MODULE_BUILD, R_OK) == 0)
        return ENG_CUDA_MODULE_BUILD;
    return ENG_CUDA_MODULE_INSTALL;
}

/* Opens the module (lock held); 0 or a negative errno with err set. */
static int open_module(eng_error *err)
{
    if (handle)
        return 0;
    const char *path = module_path();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return eng__set_err(err, -ENOENT, "cannot open the CUDA backend module: %s", dlerror());
    const eng_cuda_module *(*entry)(void) =
        (const eng_cuda_module *(*)(void))dlsym(h, "eng_cuda_module_entry");
    const eng_cuda_module *m = entry ? entry() : NULL;
    if (!m || m->abi != ENG_CUDA_MODULE_ABI) {
        dlclose(h);
        return eng__set_err(err, -ENOEXEC, "%s is not this build's CUDA backend module "
                            "(ABI %u, want %u)", path, m ? m->abi : 0u,
                            (unsigned)ENG_CUDA_MODULE_ABI);
    }
    handle = h;
    mod = m;
    return 0;
}

int eng_backend_cuda_new(int device, eng_backend **ret_backend, eng_error *err)
{
    if (ret_backend)
        *ret_backend = NULL;
    pthread_mutex_lock(&lock);
    int r = open_module(err);
    if (r == 0) {
        r = mod->backend_new(device, ret_backend, err);
        if (r == 0)
            kept = true;
        else if (!kept) { /* (no GPU here: cuBLAS's memory back) */
            dlclose(handle);
            handle = NULL;
            mod = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

int eng_backend_cuda_describe(const eng_backend *be, char *name, size_t name_size,
                              bool *integrated, double *peak_gbps)
{
    pthread_mutex_lock(&lock);
    /* (no module open: no CUDA backend exists) */
    const int r = mod ? mod->describe(be, name, name_size, integrated, peak_gbps) : -EINVAL;
    pthread_mutex_unlock(&lock);
    return r;
}

int eng__backend_graph_stats(const eng_backend *be, eng_graph_stats *ret)
{
    pthread_mutex_lock(&lock);
    const int r = mod ? mod->graph_stats(be, ret) : -EINVAL;
    pthread_mutex_unlock(&lock);
    return r;
}
