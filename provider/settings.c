/*
 * settings.c - knobs: openssl.cnf provider-section parameters, overridden by
 * environment variables (the variable wins).
 */
#include <errno.h>
#include <stdlib.h>
#include <openssl/params.h>

#include "gpuaes.h"

/*
 * Default offload threshold.  Below it a GPU round trip (staging copies,
 * ~6 us of synchronisation) loses to one AES-NI core; chosen from the
 * measurements written down in docs/DESIGN.md ("Offload threshold").
 */
#define OFFLOAD_MIN_BYTES_DEFAULT ((size_t)4 << 20)

/* Parses a byte count ("1048576", "4M", "64K"); returns 0 if malformed. */
static int parse_bytes(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s == '\0')
        return 0;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s)
        return 0;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end != '\0')
        return 0;
    *out = (size_t)v;
    return 1;
}

size_t settings_offload_min_bytes(const OSSL_CORE_HANDLE *handle,
                                  OSSL_FUNC_core_get_params_fn *core_get_params)
{
    size_t v = OFFLOAD_MIN_BYTES_DEFAULT;
    const char *env = getenv("GPUAES_OFFLOAD_MIN_BYTES");
    char *cnf = NULL;
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_ptr("offload_min_bytes", &cnf, 0), OSSL_PARAM_END };

    if (core_get_params != NULL && core_get_params(handle, p) && cnf != NULL
        && !parse_bytes(cnf, &v))
        gpuaes_debug("ignoring malformed offload_min_bytes = %s", cnf);
    if (env != NULL && !parse_bytes(env, &v))
        gpuaes_debug("ignoring malformed GPUAES_OFFLOAD_MIN_BYTES=%s", env);
    return v;
}
