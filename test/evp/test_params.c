/*
 * test_params.c - gpuaes must look exactly like the default provider's AES to
 * an application: cipher parameters, flags, names and aliases, parameter
 * lists; plus sane provider parameters and the openssl.cnf setting.
 * The context-level checks live in test_params_ctx.c, num in test_params_num.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_params.h"
#include "api_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

static const char *env_or_null(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && *v != '\0' ? v : NULL;
}

/* ---- provider parameters ---- */

static void check_provider_params(test_env *env)
{
    static const struct { const char *key; unsigned type; } want[] = {
        { "name", OSSL_PARAM_UTF8_PTR }, { "version", OSSL_PARAM_UTF8_PTR },
        { "buildinfo", OSSL_PARAM_UTF8_PTR }, { "status", OSSL_PARAM_INTEGER },
        { "gpu", OSSL_PARAM_UTF8_PTR }, { "gpu-available", OSSL_PARAM_INTEGER },
        { "gpu-bytes", OSSL_PARAM_UNSIGNED_INTEGER },
        { "gpu-errors", OSSL_PARAM_UNSIGNED_INTEGER },
        { "offload-min-bytes", OSSL_PARAM_UNSIGNED_INTEGER },
    };
    const OSSL_PARAM *g = OSSL_PROVIDER_gettable_params(env->gpuaes);
    const char *name = NULL, *version = NULL, *build = NULL, *gpu = NULL;
    int status = -1, avail = -1;
    uint64_t bytes = 1, errors = 1, minb = 0;
    OSSL_PARAM p[] = {
        OSSL_PARAM_utf8_ptr("name", &name, 0), OSSL_PARAM_utf8_ptr("version", &version, 0),
        OSSL_PARAM_utf8_ptr("buildinfo", &build, 0), OSSL_PARAM_int("status", &status),
        OSSL_PARAM_utf8_ptr("gpu", &gpu, 0), OSSL_PARAM_int("gpu-available", &avail),
        OSSL_PARAM_uint64("gpu-bytes", &bytes), OSSL_PARAM_uint64("gpu-errors", &errors),
        OSSL_PARAM_uint64("offload-min-bytes", &minb), OSSL_PARAM_END
    };
    const char *disable = env_or_null("GPUAES_DISABLE_GPU");
    const char *envmin = env_or_null("GPUAES_OFFLOAD_MIN_BYTES");

    CHECKF(strcmp(OSSL_PROVIDER_get0_name(env->gpuaes), "gpuaes") == 0, "provider name");
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const OSSL_PARAM *q = OSSL_PARAM_locate_const(g, want[i].key);

        CHECKF(q != NULL && q->data_type == want[i].type,
               "gettable provider param %s missing or of the wrong type", want[i].key);
    }
    CHECK(OSSL_PROVIDER_get_params(env->gpuaes, p));
    for (int i = 0; p[i].key != NULL; i++)
        CHECKF(OSSL_PARAM_modified(&p[i]), "provider param %s not returned", p[i].key);
    CHECKF(name != NULL && *name != '\0', "name empty");
    CHECKF(version != NULL && *version != '\0', "version empty");
    CHECKF(build != NULL, "buildinfo NULL");
    CHECKF(status == 1, "status %d", status);
    CHECKF(gpu != NULL && *gpu != '\0', "gpu string empty");
    CHECKF(avail == 0 || avail == 1, "gpu-available %d", avail);
    /* Nothing has been encrypted yet in this process. */
    CHECKF(bytes == 0 && errors == 0, "gpu-bytes %llu gpu-errors %llu at start",
           (unsigned long long)bytes, (unsigned long long)errors);
    if (disable != NULL && strcmp(disable, "1") == 0)
        CHECKF(avail == 0, "gpu-available %d with GPUAES_DISABLE_GPU=1", avail);
    if (envmin != NULL)
        CHECKF(minb == strtoull(envmin, NULL, 0), "offload-min-bytes %llu, env says %s",
               (unsigned long long)minb, envmin);
    printf("provider: %s %s; gpu: %s (available %d); offload-min-bytes %llu\n",
           name ? name : "?", version ? version : "?", gpu ? gpu : "?", avail,
           (unsigned long long)minb);
}

/* ---- openssl.cnf: offload_min_bytes in the provider section (env wins) ---- */

static int find_gpuaes(OSSL_PROVIDER *p, void *arg)
{
    if (strcmp(OSSL_PROVIDER_get0_name(p), "gpuaes") == 0)
        *(OSSL_PROVIDER **)arg = p;
    return 1;
}

static void check_config(void)
{
    const char *dir = env_or_null("GPUAES_MODULE_DIR");
    const char *envmin = env_or_null("GPUAES_OFFLOAD_MIN_BYTES");
    const char *tmp = env_or_null("TMPDIR");
    char path[512];
    OSSL_LIB_CTX *l;
    OSSL_PROVIDER *prov = NULL;
    EVP_CIPHER *c;
    uint64_t minb = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64("offload-min-bytes", &minb), OSSL_PARAM_END };
    FILE *f;
    int fd;

    if (dir == NULL) {
        printf("config check skipped: GPUAES_MODULE_DIR unset\n");
        return;
    }
    snprintf(path, sizeof(path), "%s/gpuaes_params_XXXXXX", tmp ? tmp : "/tmp");
    fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL)
        return;
    fprintf(f, "openssl_conf = openssl_init\n[openssl_init]\nproviders = provider_sect\n"
            "alg_section = algorithm_sect\n[provider_sect]\ndefault = default_sect\n"
            "gpuaes = gpuaes_sect\n[default_sect]\nactivate = 1\n[gpuaes_sect]\n"
            "module = %s/gpuaes.so\nactivate = 1\noffload_min_bytes = 4321\n"
            "[algorithm_sect]\ndefault_properties = ?provider=gpuaes\n", dir);
    fclose(f);
    l = OSSL_LIB_CTX_new();
    CHECKF(OSSL_LIB_CTX_load_config(l, path), "load config %s", path);
    OSSL_PROVIDER_do_all(l, find_gpuaes, &prov);
    CHECKF(prov != NULL, "gpuaes not activated by the config");
    if (prov != NULL) {
        CHECK(OSSL_PROVIDER_get_params(prov, p));
        CHECKF(minb == (envmin ? strtoull(envmin, NULL, 0) : 4321),
               "offload-min-bytes %llu from config (offload_min_bytes = 4321, env %s)",
               (unsigned long long)minb, envmin ? envmin : "unset");
    }
    /* ?provider=gpuaes as default property: a plain fetch lands on gpuaes. */
    c = EVP_CIPHER_fetch(l, "AES-128-CTR", NULL);
    CHECKF(c != NULL && strcmp(OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(c)), "gpuaes") == 0,
           "AES-128-CTR via config comes from %s",
           c ? OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(c)) : "nowhere");
    EVP_CIPHER_free(c);
    OSSL_LIB_CTX_free(l);
    unlink(path);
}

/* ---- cipher-level parameters, flags and parameter lists ---- */

/* Same keys with the same data types, in either direction. */
static void compare_lists(const char *cname, const char *what,
                          const OSSL_PARAM *d, const OSSL_PARAM *g)
{
    for (const OSSL_PARAM *p = d; p != NULL && p->key != NULL; p++) {
        const OSSL_PARAM *q = OSSL_PARAM_locate_const(g, p->key);

        CHECKF(q != NULL && q->data_type == p->data_type, "%s %s: default has %s (type %u), gpuaes %s",
               cname, what, p->key, p->data_type, q ? "another type" : "lacks it");
    }
    for (const OSSL_PARAM *q = g; q != NULL && q->key != NULL; q++)
        CHECKF(OSSL_PARAM_locate_const(d, q->key) != NULL, "%s %s: gpuaes has extra %s",
               cname, what, q->key);
}

static void check_cipher(test_env *env, const char *cname)
{
    EVP_CIPHER *cd = api_fetch(env, cname, "default"), *cg = api_fetch(env, cname, "gpuaes");
    const OSSL_PARAM *list = EVP_CIPHER_gettable_params(cd);
    EVP_CIPHER_CTX *xd = EVP_CIPHER_CTX_new(), *xg = EVP_CIPHER_CTX_new();
    unsigned char key[32] = { 1 }, iv[16] = { 2 };

    compare_lists(cname, "gettable params", list, EVP_CIPHER_gettable_params(cg));
    compare_lists(cname, "gettable ctx params", EVP_CIPHER_gettable_ctx_params(cd),
                  EVP_CIPHER_gettable_ctx_params(cg));
    compare_lists(cname, "settable ctx params", EVP_CIPHER_settable_ctx_params(cd),
                  EVP_CIPHER_settable_ctx_params(cg));
    for (const OSSL_PARAM *p = list; p != NULL && p->key != NULL; p++) {
        pval a, b;

        pv_cipher(cd, p->key, p->data_type, &a);
        pv_cipher(cg, p->key, p->data_type, &b);
        if (!pv_equal(&a, &b)) {
            fprintf(stderr, "%s: cipher param %s differs\n", cname, p->key);
            pv_print("default", &a);
            pv_print("gpuaes ", &b);
            check_failed(__FILE__, __LINE__, "cipher param");
        }
    }
    CHECKF(EVP_CIPHER_get_flags(cd) == EVP_CIPHER_get_flags(cg), "%s flags %lx vs %lx", cname,
           EVP_CIPHER_get_flags(cd), EVP_CIPHER_get_flags(cg));
    CHECKF(EVP_CIPHER_get_nid(cd) == EVP_CIPHER_get_nid(cg), "%s nid", cname);
    CHECKF(EVP_CIPHER_get_key_length(cd) == EVP_CIPHER_get_key_length(cg), "%s keylen", cname);
    CHECKF(EVP_CIPHER_get_iv_length(cd) == EVP_CIPHER_get_iv_length(cg), "%s ivlen", cname);
    CHECKF(EVP_CIPHER_get_block_size(cd) == EVP_CIPHER_get_block_size(cg), "%s blocksize", cname);
    CHECKF(EVP_CIPHER_get_mode(cd) == EVP_CIPHER_get_mode(cg), "%s mode", cname);
    CHECKF(strcmp(EVP_CIPHER_get0_name(cd), EVP_CIPHER_get0_name(cg)) == 0, "%s name %s vs %s",
           cname, EVP_CIPHER_get0_name(cd), EVP_CIPHER_get0_name(cg));
    /* The lists an initialised context reports. */
    CHECK(EVP_EncryptInit_ex2(xd, cd, key, iv, NULL) && EVP_EncryptInit_ex2(xg, cg, key, iv, NULL));
    compare_lists(cname, "ctx gettable", EVP_CIPHER_CTX_gettable_params(xd),
                  EVP_CIPHER_CTX_gettable_params(xg));
    compare_lists(cname, "ctx settable", EVP_CIPHER_CTX_settable_params(xd),
                  EVP_CIPHER_CTX_settable_params(xg));
    EVP_CIPHER_CTX_free(xd);
    EVP_CIPHER_CTX_free(xg);
    EVP_CIPHER_free(cd);
    EVP_CIPHER_free(cg);
}

/* ---- names and aliases ---- */

/* Every ':'-separated name of a is in b (case-insensitive, as the namemap). */
static int names_subset(const char *a, const char *b)
{
    for (const char *s = a; *s != '\0';) {
        size_t n = strcspn(s, ":");
        int found = 0;

        for (const char *t = b; *t != '\0' && !found;) {
            size_t m = strcspn(t, ":");

            found = m == n && strncasecmp(s, t, n) == 0;
            t += m + (t[m] == ':');
        }
        if (!found)
            return 0;
        s += n + (s[n] == ':');
    }
    return 1;
}

/* The algorithm entry of a provider whose names include cname. */
static const OSSL_ALGORITHM *find_alg(const OSSL_ALGORITHM *a, const char *cname, int *count)
{
    const OSSL_ALGORITHM *hit = NULL;

    *count = 0;
    for (; a != NULL && a->algorithm_names != NULL; a++)
        if (names_subset(cname, a->algorithm_names)) {
            hit = a;
            ++*count;
        }
    return hit;
}

static void collect_name(const char *name, void *arg)
{
    char *buf = arg;
    size_t l = strlen(buf);

    snprintf(buf + l, 1024 - l, "%s%s", l ? ":" : "", name);
}

/* The names the library context associates with cname when only `prov` is loaded. */
static void names_alone(const char *prov, const char *cname, char out[1024])
{
    OSSL_LIB_CTX *l = OSSL_LIB_CTX_new();
    const char *dir = env_or_null("GPUAES_MODULE_DIR");
    OSSL_PROVIDER *p;
    EVP_CIPHER *c;

    out[0] = '\0';
    if (dir != NULL)
        OSSL_PROVIDER_set_default_search_path(l, dir);
    p = OSSL_PROVIDER_load(l, prov);
    c = EVP_CIPHER_fetch(l, cname, NULL);
    CHECKF(c != NULL, "%s alone: cannot fetch %s", prov, cname);
    if (c != NULL)
        EVP_CIPHER_names_do_all(c, collect_name, out);
    EVP_CIPHER_free(c);
    OSSL_PROVIDER_unload(p);
    OSSL_LIB_CTX_free(l);
}

static void check_names(test_env *env)
{
    static const char *const must[][2] = {
        { "AES-128-CBC", "AES128" }, { "AES-128-CBC", "2.16.840.1.101.3.4.1.2" },
        { "AES-256-CBC", "AES256" }, { "AES-128-GCM", "id-aes128-GCM" },
        { "AES-256-GCM", "2.16.840.1.101.3.4.1.46" }, { "AES-192-CFB", "2.16.840.1.101.3.4.1.24" },
    };
    int ncache, total = 0;
    const OSSL_ALGORITHM *ag = OSSL_PROVIDER_query_operation(env->gpuaes, OSSL_OP_CIPHER, &ncache);
    const OSSL_ALGORITHM *ad = OSSL_PROVIDER_query_operation(env->deflt, OSSL_OP_CIPHER, &ncache);

    CHECK(ag != NULL && ad != NULL);
    for (const OSSL_ALGORITHM *a = ag; a != NULL && a->algorithm_names != NULL; a++) {
        total++;
        CHECKF(a->property_definition != NULL
               && strstr(a->property_definition, "provider=gpuaes") != NULL,
               "%s: property definition %s", a->algorithm_names,
               a->property_definition ? a->property_definition : "NULL");
    }
    CHECKF(total == API_NCIPHERS, "gpuaes registers %d ciphers, want %d", total, API_NCIPHERS);
    for (int i = 0; i < API_NCIPHERS; i++) {
        const char *cname = api_ciphers[i];
        int ng, nd;
        const OSSL_ALGORITHM *g = find_alg(ag, cname, &ng), *d = find_alg(ad, cname, &nd);
        char na[1024], nb[1024];

        CHECKF(ng == 1 && nd == 1, "%s registered %d times by gpuaes, %d by default", cname, ng, nd);
        if (g == NULL || d == NULL)
            continue;
        CHECKF(names_subset(g->algorithm_names, d->algorithm_names)
               && names_subset(d->algorithm_names, g->algorithm_names),
               "%s names: gpuaes \"%s\", default \"%s\"", cname, g->algorithm_names,
               d->algorithm_names);
        /* Every alias fetches gpuaes' implementation of the same algorithm. */
        for (const char *s = d->algorithm_names; *s != '\0';) {
            size_t n = strcspn(s, ":");
            char alias[128];
            EVP_CIPHER *c;

            snprintf(alias, sizeof(alias), "%.*s", (int)n, s);
            c = EVP_CIPHER_fetch(env->libctx, alias, "provider=gpuaes");
            CHECKF(c != NULL && EVP_CIPHER_is_a(c, cname), "fetch %s from gpuaes", alias);
            EVP_CIPHER_free(c);
            s += n + (s[n] == ':');
        }
        /* What names_do_all reports with each provider alone in a context. */
        names_alone("gpuaes", cname, na);
        names_alone("default", cname, nb);
        CHECKF(names_subset(na, nb) && names_subset(nb, na), "%s names_do_all: gpuaes \"%s\", default \"%s\"",
               cname, na, nb);
    }
    for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++) {
        EVP_CIPHER *c = EVP_CIPHER_fetch(env->libctx, must[i][1], "provider=gpuaes");

        CHECKF(c != NULL && EVP_CIPHER_is_a(c, must[i][0]), "alias %s of %s", must[i][1], must[i][0]);
        EVP_CIPHER_free(c);
    }
    OSSL_PROVIDER_unquery_operation(env->gpuaes, OSSL_OP_CIPHER, ag);
    OSSL_PROVIDER_unquery_operation(env->deflt, OSSL_OP_CIPHER, ad);
}

/* ---- gpu-bytes: grows only when a GPU is used ---- */

static void check_gpu_accounting(test_env *env)
{
    uint64_t minb = 0, before, after;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64("offload-min-bytes", &minb), OSSL_PARAM_END };
    size_t n = 8u << 20, ol = 0, dl = 0;
    unsigned char *in, *out, *ref, key[16], iv[16];
    EVP_CIPHER *cg = api_fetch(env, "AES-128-CTR", "gpuaes");
    EVP_CIPHER *cd = api_fetch(env, "AES-128-CTR", "default");
    int avail = test_gpu_available(env);

    OSSL_PROVIDER_get_params(env->gpuaes, p);
    if (minb > n && minb <= (64u << 20))
        n = (size_t)minb;
    in = malloc(n);
    out = malloc(n);
    ref = malloc(n);
    test_rand_bytes(in, n);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    before = test_gpu_bytes(env);
    CHECK(api_crypt(cg, 1, key, iv, NULL, 0, in, n, out, &ol, NULL, 1));
    after = test_gpu_bytes(env);
    CHECK(api_crypt(cd, 1, key, iv, NULL, 0, in, n, ref, &dl, NULL, 1));
    CHECKF(ol == n && dl == n && memcmp(out, ref, n) == 0, "AES-128-CTR %zu bytes differ", n);
    if (!avail)
        CHECKF(after == before, "gpu-bytes grew by %llu without a GPU",
               (unsigned long long)(after - before));
    else if (minb <= n)
        CHECKF(after > before, "a %zu-byte update (offload-min-bytes %llu) did not reach the GPU",
               n, (unsigned long long)minb);
    printf("gpu-bytes after a %zu-byte CTR update: +%llu\n", n, (unsigned long long)(after - before));
    free(in);
    free(out);
    free(ref);
    EVP_CIPHER_free(cg);
    EVP_CIPHER_free(cd);
}

int main(int argc, char **argv)
{
    test_env env;

    test_seed(20240601);
    check_config();          /* first: its own library context, before anything else */
    if (!test_env_open(&env))
        return 1;
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0)
        test_require_gpu(&env);
    check_provider_params(&env);
    for (int i = 0; i < API_NCIPHERS; i++)
        check_cipher(&env, api_ciphers[i]);
    check_names(&env);
    params_ctx_tests(&env);
    params_fuzz_tests(&env);
    params_num_tests(&env);
    check_gpu_accounting(&env);
    test_env_close(&env);
    return test_report("params");
}
