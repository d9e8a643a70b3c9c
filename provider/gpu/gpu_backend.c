/*
 * gpu_backend.c - the choice of the GPU backend (gpu_backend.h), and what
 * both backends' run answers for a job they do not take.
 */
#include <pthread.h>
#include <string.h>

#include "debug.h"
#include "gpu_backend.h"

_Atomic(const gpu_backend *) gpu_backend_in_use = &gpu_backend_inprocess;

static pthread_mutex_t choose_lock = PTHREAD_MUTEX_INITIALIZER;
static int chosen;
static int users;                      /* provider instances between select and leave */

/* A fork while another thread loads the module must not leave choose_lock
 * held in the child (test_fork --locks): taken around every fork. */
static void choose_lock_take(void) { pthread_mutex_lock(&choose_lock); }
static void choose_lock_give(void) { pthread_mutex_unlock(&choose_lock); }
static void choose_lock_atfork(void) { pthread_atfork(choose_lock_take, choose_lock_give, choose_lock_give); }
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

void gpu_backend_select(gpu_backend_kind kind, const gpu_remote_settings *remote)
{
    pthread_once(&atfork_once, choose_lock_atfork);
    pthread_mutex_lock(&choose_lock);
    users++;
    if (!chosen) {
        chosen = 1;
        if (kind == GPU_BACKEND_SERVICE) {
            gpu_remote_configure(remote);
            atomic_store(&gpu_backend_in_use, &gpu_backend_service);
        }
        gpuaes_debug("GPU backend: %s", atomic_load(&gpu_backend_in_use)->name);
    } else if (kind != gpu_backend_kind_in_use()) {
        gpuaes_debug("gpu_backend %s ignored: this process already uses %s",
                     kind == GPU_BACKEND_SERVICE ? "service" : "inprocess",
                     atomic_load(&gpu_backend_in_use)->name);
    }
    pthread_mutex_unlock(&choose_lock);
}

int gpu_backend_leave(void)
{
    const gpu_backend *b;
    int last;

    pthread_mutex_lock(&choose_lock);
    last = --users == 0;
    b = atomic_load(&gpu_backend_in_use);
    pthread_mutex_unlock(&choose_lock);
    if (!last)
        return 0;
    /* Not under choose_lock: the shutdown joins the service's start thread,
     * whose posix_spawn may run the fork handlers (sanitizers' does). */
    b->job.shutdown();
    pthread_mutex_lock(&choose_lock);
    if (users == 0) {                  /* no load came meanwhile: the next one chooses */
        chosen = 0;
        atomic_store(&gpu_backend_in_use, &gpu_backend_inprocess);
    }
    pthread_mutex_unlock(&choose_lock);
    return 1;
}

gpu_backend_kind gpu_backend_kind_in_use(void)
{
    return atomic_load(&gpu_backend_in_use) == &gpu_backend_service ? GPU_BACKEND_SERVICE
                                                                    : GPU_BACKEND_INPROCESS;
}

void gpu_job_unstarted(gpuaes_job *job)
{
    job->done = 0;
    job->cpu_from = job->len;
    job->direct = 0;
    job->first_use = 0;
    job->error[0] = '\0';
    memset(job->ghash, 0, sizeof(job->ghash));
    memset(job->ghash_tail, 0, sizeof(job->ghash_tail));
    /* The state for in[len], taken before an in-place job overwrites the input. */
    memcpy(job->iv_end, job->iv, 16);
    gpuaes_state_after(job->op, job->iv_end, job->in, job->len);
    job->status = GPUAES_BUSY;
}
