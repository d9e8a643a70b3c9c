/*
 * gpu_inprocess.c - the in-process GPU layer as a backend (gpu_backend.h),
 * loaded when the process first starts the GPU.
 *
 * The layer (cuda/ with its static CUDA runtime, or the test emulator) is a
 * library of its own, gpuaes_gpu.so (include/gpuaes_layer.h), dlopened by
 * the first call that starts the GPU (gpu()->start(), after gpu_start_bytes)
 * or asks for it (the gpu-available and gpu-description parameters).  Until
 * then every call answers as the layer would before its start-up ("not
 * started", no GPU available, nothing held), so loading gpuaes, a short
 * process and the service backend never map it.  It stays mapped once loaded
 * (RTLD_NODELETE): its threads and its exit handlers (cuda/runtime/module_exit.h)
 * live as long as the process, and a later provider load reuses it.
 *
 * Where: GPUAES_LAYER_FILE beside this module (the build tree; the
 * module's directory as it was when the provider loaded), else the
 * installed GPUAES_LAYER_INSTALLED.  Absolute paths only: never searched.
 */
#define _DEFAULT_SOURCE             /* realpath */
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "offload.h"
#include "debug.h"
#include "gpu_backend.h"
#include "gpuaes_layer.h"

static _Atomic(const gpuaes_layer *) layer;  /* NULL until loaded */
static _Atomic int gave_up;                  /* 1: no layer for good (disabled, not loadable) */
static char why_not[600];                   /* the description then; written once under load_lock */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
/* What the provider configured before the load: handed to the layer first. */
static gpuaes_gpu_settings settings = GPUAES_GPU_SETTINGS_DEFAULT;
static size_t ks_limit;
static int ks_limit_set;

/* A fork while another thread loads the layer must not leave load_lock held
 * in the child (test_fork --locks). */
static void load_lock_take(void) { pthread_mutex_lock(&load_lock); }
static void load_lock_give(void) { pthread_mutex_unlock(&load_lock); }
static void load_lock_atfork(void) { pthread_atfork(load_lock_take, load_lock_give, load_lock_give); }
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static const gpuaes_layer *loaded(void)
{
    return atomic_load_explicit(&layer, memory_order_acquire);
}

/* This module's directory + GPUAES_LAYER_FILE, made at the first configure
 * (the provider's load: a module loaded by a relative path is resolved
 * against the directory of that moment, not of the GPU's start); "" when
 * unknown. */
static char beside[4096];

static void layer_beside_module(void)
{
    const char *module = NULL, *slash;
    char dir[4096], abs[PATH_MAX];
    size_t n;

    if (beside[0] != '\0' || !loaded_object((const void *)(uintptr_t)layer_beside_module, NULL, &module)
        || module == NULL || (slash = strrchr(module, '/')) == NULL
        || (n = (size_t)(slash - module)) >= sizeof(dir))
        return;
    memcpy(dir, module, n);
    dir[n] = '\0';
    if (module[0] != '/') {           /* relative to the directory of now */
        if (realpath(n > 0 ? dir : ".", abs) == NULL || strlen(abs) >= sizeof(dir))
            return;
        strcpy(dir, abs);
    }
    if (snprintf(beside, sizeof(beside), "%s/%s", dir, GPUAES_LAYER_FILE) >= (int)sizeof(beside))
        beside[0] = '\0';
}

/* load_lock held. */
static const gpuaes_layer *load_locked(void)
{
    char path[4096];
    void *h;
    gpuaes_layer_get_fn *get;
    const gpuaes_layer *l;
    uint64_t t0 = dispatch_now_ns();

    if (settings.disable_gpu) {
        snprintf(why_not, sizeof(why_not), "disabled by GPUAES_DISABLE_GPU");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s", beside[0] != '\0' && access(beside, F_OK) == 0 ? beside
                                                                              : GPUAES_LAYER_INSTALLED);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h == NULL) {
        snprintf(why_not, sizeof(why_not), "no usable GPU: cannot load the GPU layer (%s)", dlerror());
        return NULL;
    }
    get = (gpuaes_layer_get_fn *)dlsym(h, GPUAES_LAYER_SYMBOL);
    l = get != NULL ? get() : NULL;
    if (l == NULL || l->abi != GPUAES_LAYER_ABI || l->size != sizeof(*l)) {
        snprintf(why_not, sizeof(why_not), "no usable GPU: %.400s is not this build's GPU layer", path);
        return NULL;                /* mapped for good (RTLD_NODELETE), never called */
    }
    l->configure(&settings);
    if (ks_limit_set)
        l->ks_set_limit(ks_limit);
    gpuaes_debug("GPU layer %s loaded in %.2f ms", path, (double)(dispatch_now_ns() - t0) / 1e6);
    return l;
}

/* The layer, loaded now if it was not; NULL when there is none. */
static const gpuaes_layer *load(void)
{
    const gpuaes_layer *l = loaded();

    if (l != NULL || atomic_load(&gave_up))
        return l;
    pthread_mutex_lock(&load_lock);
    l = loaded();
    if (l == NULL && !atomic_load(&gave_up)) {
        l = load_locked();
        if (l != NULL) {
            atomic_store_explicit(&layer, l, memory_order_release);
        } else {
            gpuaes_debug("%s", why_not);
            atomic_store(&gave_up, 1);
        }
    }
    pthread_mutex_unlock(&load_lock);
    return l;
}

void gpu_inprocess_configure(const gpuaes_gpu_settings *s)
{
    const gpuaes_layer *l;

    pthread_once(&atfork_once, load_lock_atfork);
    gpuaes_gpu_configure(s);        /* this module's copy pool (the service backend's copies) */
    pthread_mutex_lock(&load_lock);
    layer_beside_module();
    settings = *s;
    l = loaded();
    pthread_mutex_unlock(&load_lock);
    if (l != NULL)
        l->configure(s);
}

void gpu_inprocess_ks_limit(size_t total_bytes)
{
    const gpuaes_layer *l;

    pthread_mutex_lock(&load_lock);
    ks_limit = total_bytes;
    ks_limit_set = 1;
    l = loaded();
    pthread_mutex_unlock(&load_lock);
    if (l != NULL)
        l->ks_set_limit(total_bytes);
}

/* ---- the backend: each call as the layer answers before its start-up, until it is loaded ---- */

static int ip_available(void)
{
    const gpuaes_layer *l = loaded();
    return l != NULL && l->available();
}

static int ip_wait(void)
{
    const gpuaes_layer *l = load();
    return l != NULL && l->wait();
}

static int ip_supports(gpuaes_op op)
{
    const gpuaes_layer *l = loaded();
    return l != NULL && l->supports(op);
}

static const char *ip_description(void)
{
    const gpuaes_layer *l = load();
    return l != NULL ? l->description() : why_not;
}

static int ip_started(void)
{
    const gpuaes_layer *l = loaded();
    return l != NULL ? l->started() : atomic_load(&gave_up);
}

static const char *ip_state(void)
{
    const gpuaes_layer *l = loaded();

    if (l != NULL)
        return l->state();
    return atomic_load(&gave_up) ? why_not : GPUAES_STATE_NOT_STARTED;
}

static void ip_run(gpuaes_job *job)
{
    const gpuaes_layer *l = loaded();

    if (l != NULL) {
        l->run(job);
        return;
    }
    gpu_job_unstarted(job);         /* no layer, no key from it: nothing done */
}

static gpuaes_key *ip_key_new(const unsigned char *key, size_t keylen)
{
    const gpuaes_layer *l = loaded();
    return l != NULL ? l->key_new(key, keylen) : NULL;
}

/* A key exists only from a loaded layer, which stays. */
static void ip_key_free(gpuaes_key *key)
{
    const gpuaes_layer *l = loaded();
    if (l != NULL)
        l->key_free(key);
}

static gpuaes_ks_window *ip_window_new(size_t cap)
{
    const gpuaes_layer *l = loaded();
    return l != NULL ? l->ks_window_new(cap) : NULL;
}

/* The calls on a window: it came from the loaded layer. */
static gpuaes_status ip_fill(gpuaes_ks_window *w, const gpuaes_key *key, const unsigned char ctr[16],
                             size_t nbytes, int ctr32, char error[GPUAES_ERROR_SIZE])
{
    return loaded()->ks_fill(w, key, ctr, nbytes, ctr32, error);
}

static int ip_ready(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE]) { return loaded()->ks_ready(w, error); }

static int ip_pin(gpuaes_ks_window *w, const unsigned char **data, char error[GPUAES_ERROR_SIZE])
{
    return loaded()->ks_pin(w, data, error);
}

static void ip_unpin(gpuaes_ks_window *w) { loaded()->ks_unpin(w); }

static void ip_window_free(gpuaes_ks_window *w)
{
    if (w != NULL)
        loaded()->ks_window_free(w);
}

/* Either pointer may be NULL, as for gpuaes_ks_windows(). */
static void ip_windows(size_t *windows, size_t *pooled)
{
    const gpuaes_layer *l = loaded();

    if (l != NULL) {
        l->ks_windows(windows, pooled);
        return;
    }
    if (windows != NULL)
        *windows = 0;
    if (pooled != NULL)
        *pooled = 0;
}

static void ip_memory(gpuaes_gpu_memory_stats *m)
{
    const gpuaes_layer *l = loaded();

    if (l != NULL)
        l->memory(m);
    else
        *m = (gpuaes_gpu_memory_stats){ 0, 0, 0 };
}

static void ip_ks_stats(unsigned long long *launches, unsigned long long *jobs)
{
    const gpuaes_layer *l = loaded();

    *launches = *jobs = 0;
    if (l != NULL)
        l->ks_stats(launches, jobs);
}

/* Not called through the backend (gpu_inprocess_configure, _ks_limit). */
static void ip_configure(const gpuaes_gpu_settings *s) { gpu_inprocess_configure(s); }
static void ip_ks_set_limit(size_t total_bytes) { gpu_inprocess_ks_limit(total_bytes); }

/* The last provider instance is gone: the layer's threads and memory go back
 * (it stays mapped); a process that never loaded it has nothing to give. */
static void ip_shutdown(void)
{
    const gpuaes_layer *l = loaded();

    if (l != NULL)
        l->shutdown();
    atomic_store(&gave_up, 0);      /* a later load tries again, with its own settings */
}

static unsigned ip_load(gpuaes_op op, uint64_t *ns_per_byte, unsigned *procs)
{
    (void)op;
    *ns_per_byte = 0;
    *procs = 0;
    return 0;
}

const gpu_backend gpu_backend_inprocess = {
    "inprocess", ip_wait, ip_load,
    { GPUAES_LAYER_ABI, sizeof(gpuaes_layer),
      ip_configure, ip_available, ip_wait, ip_supports, ip_description, ip_started, ip_state, ip_run,
      ip_key_new, ip_key_free, ip_memory, ip_shutdown,
      ip_ks_set_limit, ip_window_new, ip_fill, ip_ready, ip_pin, ip_unpin, ip_window_free, ip_ks_stats,
      ip_windows }
};
