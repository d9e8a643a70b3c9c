// module_exit.cpp - see module_exit.h.
#include "runtime/module_exit.h"

#include <atomic>
#include <dlfcn.h>
#include <pthread.h>

extern "C" {
extern void *__dso_handle;
int __real___cxa_atexit(void (*fn)(void *), void *arg, void *dso);
int __wrap___cxa_atexit(void (*fn)(void *), void *arg, void *dso);
int __wrap_atexit(void (*fn)(void));
}

namespace gpuaes {
namespace {

struct Handler {
    void (*fn)(void *);    // __cxa_atexit's form
    void (*plain)(void);   // atexit's form
    void *arg;
};

// The module registers a handful (the runtime's teardown and its lazily made
// statics, one fatbinary per .cu file); past the room, glibc keeps them.
constexpr int kRoom = 64;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; // everything below
Handler g_list[kRoom];
int g_count = 0;
bool g_registered = false; // the module's glibc handler
bool g_done = false;       // it ran: later registrations go to glibc
std::atomic<QuiesceFn> g_quiesce{nullptr};

// Keeps this module mapped for the rest of the process (a thread may still
// return into it).
void keep_mapped()
{
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&keep_mapped), &info) != 0 && info.dli_fname != nullptr)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

std::atomic<bool> g_ran{false};

void run_module_exit(void *)
{
    if (g_ran.exchange(true)) return;
    const QuiesceFn quiesce = g_quiesce.load();
    const bool quiet = quiesce == nullptr || quiesce();
    if (!quiet) keep_mapped();
    pthread_mutex_lock(&g_lock);
    for (;;) {
        if (!quiet || g_count == 0) {
            g_count = 0; // skipped: see module_exit.h
            g_done = true;
            break;
        }
        const Handler h = g_list[--g_count];
        pthread_mutex_unlock(&g_lock); // a handler may register another (run next)
        if (h.plain != nullptr) h.plain();
        else h.fn(h.arg);
        pthread_mutex_lock(&g_lock);
    }
    pthread_mutex_unlock(&g_lock);
}

// g_lock held.
void register_locked()
{
    if (g_registered) return;
    g_registered = __real___cxa_atexit(run_module_exit, nullptr, &__dso_handle) == 0;
}

// False: not kept (full, or the module's exit already ran): glibc's then.
bool keep(const Handler &h)
{
    pthread_mutex_lock(&g_lock);
    register_locked();
    const bool kept = g_registered && !g_done && g_count < kRoom;
    if (kept) g_list[g_count++] = h;
    pthread_mutex_unlock(&g_lock);
    return kept;
}

void call_plain(void *fn) { reinterpret_cast<void (*)(void)>(fn)(); }

} // namespace

void module_exit_install(QuiesceFn quiesce)
{
    g_quiesce.store(quiesce);
    pthread_mutex_lock(&g_lock);
    register_locked();
    pthread_mutex_unlock(&g_lock);
}

void module_exit_register_again()
{
    if (!g_ran.load()) (void)__real___cxa_atexit(run_module_exit, nullptr, &__dso_handle);
}

} // namespace gpuaes

// Handlers for another object (dso not this module's) are not ours to order.
extern "C" int __wrap___cxa_atexit(void (*fn)(void *), void *arg, void *dso)
{
    if (dso == &__dso_handle && gpuaes::keep({fn, nullptr, arg})) return 0;
    return __real___cxa_atexit(fn, arg, dso);
}

// atexit() from a shared object binds the handler to that object (glibc's
// libc_nonshared does the same).
extern "C" int __wrap_atexit(void (*fn)(void))
{
    if (gpuaes::keep({nullptr, fn, nullptr})) return 0;
    return __real___cxa_atexit(gpuaes::call_plain, reinterpret_cast<void *>(fn), &__dso_handle);
}
