/*
 * assumptions.c - the table of the checks of provider/assume/fallback_assumptions.h
 * (assume_block.c, assume_gcm.c): runs one for a test, or those marked
 * "load" when the provider loads.  AES-128 throughout; every check is a few
 * blocks of work.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>

#include "assume_util.h"
#include "debug.h"
#include "prov_ctx.h"
#include "gpu/offload.h"

/* ---- the table ---- */

static const struct {
    const char *name;
    int (*run)(assume_run *r);
    int at_load;
} checks[ASSUME_COUNT] = {
#define ASSUME_ENTRY(id, load) { "ASSUME_" #id, check_##id, load },
    GPUAES_ASSUMPTIONS(ASSUME_ENTRY)
#undef ASSUME_ENTRY
};

const char *assume_name(gpuaes_assumption a)
{
    return a < ASSUME_COUNT ? checks[a].name : "?";
}

int assume_at_load(gpuaes_assumption a)
{
    return a < ASSUME_COUNT && checks[a].at_load;
}

int assume_check(gpuaes_assumption a, assume_run *r)
{
    int ok;

    r->seen = 0;
    r->why[0] = '\0';
    if (a >= ASSUME_COUNT)
        return 0;
    ERR_set_mark();                   /* the default provider's refusals are expected */
    ok = checks[a].run(r);
    ERR_pop_to_mark();
    return ok;
}

int assume_first_failure(const gpuaes_prov *prov, assume_run *r)
{
#ifdef GPUAES_TEST_HOOKS
    /* The emulated module only: make one check fail, to test what follows. */
    const char *brk = getenv("GPUAES_TEST_BREAK_ASSUMPTION");
#else
    const char *brk = NULL;
#endif

    for (int a = 0; a < ASSUME_COUNT; a++) {
        int ok;

        *r = (assume_run){ .provctx = prov->fallback_provctx, .fallbacks = prov->fallbacks,
                           .flip = brk != NULL && strcmp(brk, checks[a].name) == 0 };
        if (!checks[a].at_load)
            continue;
        err_set_mark(prov);           /* the application's default provider refuses on the core's queue */
        ok = assume_check(a, r);
        err_pop_to_mark(prov);
        if (!ok)
            return a;
    }
    return -1;
}

int assume_verify_at_load(gpuaes_prov *prov)
{
    assume_run r;
    int a;

    if (prov->fallback_app)           /* fallback_load kept it only after these same checks */
        return 1;
    a = assume_first_failure(prov, &r);
    if (a < 0)
        return 1;
    /* A libcrypto that behaves otherwise: only the default provider's answers. */
    prov->gpu_path_off = 1;
    GPUAES_RAISE_DATA(prov, ERR_R_INIT_FAIL,
                      "gpuaes: the default provider breaks %s (%s): GPU path off",
                      checks[a].name, r.why);
    gpuaes_debug("the default provider breaks %s (%s): GPU path off", checks[a].name, r.why);
    return 0;
}
