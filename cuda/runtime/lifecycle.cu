// lifecycle.cu - giving the GPU layer's resources back: the idle release
// thread (slots and pooled keystream windows idle for idle_release_ns() are
// wiped and freed) and gpu_resources_release() (provider unload, exit).
// See lifecycle.h for the contracts.
//
// The thread is started by the first slot or window that may become idle
// (idle_release_kick), sleeps on a timed condition variable while anything
// is held, without a timeout once nothing is, and is joined by every
// release.  Its signals are blocked.  A forked child never runs it (the
// thread does not exist there, and a child of a CUDA user holds nothing).
#include "runtime/lifecycle.h"

#include <cerrno>
#include <cstdint>
#include <ctime>
#include <pthread.h>

#include "copy/copy_pool.h"
#include "runtime/gpu_settings.h"
#include "runtime/device.h"
#include "keystream/ks_windows.h"
#include "staging/slot_pool.h"
#include "gpuaes_gpu.h"
#include "runtime/clock.h"
#include "runtime/quiet_thread.h"

namespace gpuaes {
namespace {

enum TrimState { kOff, kOn, kClosed };

pthread_mutex_t g_tlock = PTHREAD_MUTEX_INITIALIZER; // everything below
pthread_cond_t g_tcond;                              // CLOCK_MONOTONIC, made before each start
int g_tstate = kOff;
bool g_stop = false;
bool g_kicked = false;
pthread_t g_thread;

void *trim_main(void *)
{
    const int64_t idle = idle_release_ns();
    bool held = true;
    pthread_mutex_lock(&g_tlock);
    while (!g_stop) {
        if (held || g_kicked) {
            // Half the bound: a slot or window goes at most 1.5 x the bound after it became idle.
            const timespec until = mono_deadline(idle / 2);
            int rc = 0;
            while (!g_stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_tcond, &g_tlock, &until);
        } else {
            pthread_cond_wait(&g_tcond, &g_tlock);
        }
        if (g_stop) break;
        g_kicked = false;
        pthread_mutex_unlock(&g_tlock);
        const int64_t now = mono_ns();
        const bool slots = staging_trim(now, idle);
        const bool windows = keystream_trim(now, idle);
        held = slots || windows;
        pthread_mutex_lock(&g_tlock);
    }
    pthread_mutex_unlock(&g_tlock);
    return nullptr;
}

// g_tlock held, g_tstate == kOff.
void start_locked()
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0) return;
    const bool made = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&g_tcond, &a) == 0;
    pthread_condattr_destroy(&a);
    if (!made) return;
    g_stop = false;
    if (start_quiet_thread(&g_thread, trim_main, nullptr, "gpuaes-idle"))
        g_tstate = kOn;
    else
        pthread_cond_destroy(&g_tcond); // no thread: nothing is given back while idle
}

// Joins the thread; final: never again.
void idle_release_stop(bool final)
{
    pthread_mutex_lock(&g_tlock);
    if (g_tstate == kOn) {
        g_stop = true;
        pthread_cond_signal(&g_tcond);
        pthread_mutex_unlock(&g_tlock);
        (void)pthread_join(g_thread, nullptr);
        pthread_mutex_lock(&g_tlock);
        pthread_cond_destroy(&g_tcond);
        g_stop = false;
        g_kicked = false;
        g_tstate = kOff;
    }
    if (final) g_tstate = kClosed;
    pthread_mutex_unlock(&g_tlock);
}

} // namespace

void idle_release_kick()
{
    if (cuda_forbidden()) return;
    pthread_mutex_lock(&g_tlock);
    if (g_tstate == kOff) start_locked();
    if (g_tstate == kOn) {
        g_kicked = true;
        pthread_cond_signal(&g_tcond);
    }
    pthread_mutex_unlock(&g_tlock);
}

void idle_release_atfork_child()
{
    // Only the forking thread exists in the child: the parent's idle
    // thread is not ours to join, and a child never starts one.
    pthread_mutex_init(&g_tlock, nullptr);
    g_tstate = kClosed;
}

void gpu_resources_release(bool final)
{
    if (cuda_forbidden()) return; // a forked child: all of it is the parent's
    idle_release_stop(final);     // first: it frees slots and windows too
    copy_pool_stop(final);        // a job still running copies alone
    staging_release(final);
    keystream_release(final);
}

} // namespace gpuaes

extern "C" void gpuaes_gpu_release(void)
{
    gpuaes::gpu_resources_release(false);
}
