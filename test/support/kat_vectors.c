/*
 * kat_vectors.c - parser for the CAVP .rsp format used by every file in
 * test/vectors: "[SECTION]" lines, records that start at "COUNT = n" and hold
 * "NAME = hex" lines (KEY/Key, IV, PLAINTEXT/PT, CIPHERTEXT/CT, AAD, Tag), a
 * bare "FAIL" line (GCM decrypt), and in hand-written files "MODE = CBC".
 * CRLF line ends are accepted (the GCM files use them).
 */
#include "kat_vectors.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define AESAVS(dir, p, m)                                                        \
    { dir "/" p "GFSbox128.rsp", m }, { dir "/" p "GFSbox192.rsp", m },          \
    { dir "/" p "GFSbox256.rsp", m }, { dir "/" p "KeySbox128.rsp", m },         \
    { dir "/" p "KeySbox192.rsp", m }, { dir "/" p "KeySbox256.rsp", m },        \
    { dir "/" p "VarKey128.rsp", m }, { dir "/" p "VarKey192.rsp", m },          \
    { dir "/" p "VarKey256.rsp", m }, { dir "/" p "VarTxt128.rsp", m },          \
    { dir "/" p "VarTxt192.rsp", m }, { dir "/" p "VarTxt256.rsp", m },          \
    { dir "/" p "MMT128.rsp", m }, { dir "/" p "MMT192.rsp", m }, { dir "/" p "MMT256.rsp", m }

const kat_file kat_files[] = {
    { "sp800_38a_fips197.txt", -1 },
    AESAVS("ECB", "ECB", KD_ECB),
    AESAVS("CBC", "CBC", KD_CBC),
    AESAVS("CFB", "CFB128", KD_CFB),
    { "CTR/aes-128-ctr.txt", KD_CTR }, { "CTR/aes-192-ctr.txt", KD_CTR },
    { "CTR/aes-256-ctr.txt", KD_CTR },
    { "GCM/gcmEncryptExtIV128.rsp", KD_GCM }, { "GCM/gcmEncryptExtIV192.rsp", KD_GCM },
    { "GCM/gcmEncryptExtIV256.rsp", KD_GCM }, { "GCM/gcmDecrypt128.rsp", KD_GCM },
    { "GCM/gcmDecrypt192.rsp", KD_GCM }, { "GCM/gcmDecrypt256.rsp", KD_GCM },
    { "gcm_extra.txt", KD_GCM },
    { NULL, 0 }
};

static const struct { const char *name; kd_mode mode; } mode_names[] = {
    { "ECB", KD_ECB }, { "CBC", KD_CBC }, { "CFB", KD_CFB }, { "CTR", KD_CTR }, { "GCM", KD_GCM },
};

/* A record being read: fields seen so far. */
typedef struct {
    kat_vector v;
    const char *file;
    int cur;                   /* line being read, for messages */
    int mode, open, have_key, have_iv, have_pt, have_ct, have_tag;
} record;

static void vector_free(kat_vector *v)
{
    free(v->key); free(v->iv); free(v->pt); free(v->ct); free(v->aad); free(v->tag);
}

static int bad(const record *r, const char *why)
{
    fprintf(stderr, "%s:%d: %s\n", r->file, r->cur, why);
    return 0;
}

/* Checks a finished record and appends it; 0 if malformed. */
static int finish(record *r, kat_list *l)
{
    kat_vector *v = &r->v;
    kd_mode m = (kd_mode)r->mode;

    if (!r->open)
        return 1;
    r->open = 0;
    if (r->mode < 0)
        return bad(r, "no MODE for this record");
    if (!r->have_key || (v->cipher = kd_find(m, v->keylen)) == NULL)
        return bad(r, "missing key or bad key length");
    if (m != KD_ECB && (!r->have_iv || v->ivlen == 0 || v->ivlen > (m == KD_GCM ? 128u : 16u)
                        || (m != KD_GCM && v->ivlen != 16)))
        return bad(r, "missing or bad IV");
    if (!r->have_ct || (!v->fail && (!r->have_pt || v->ptlen != v->ctlen)))
        return bad(r, "plaintext/ciphertext missing or of different lengths");
    if (kd_is_block_mode(m) && v->ctlen % 16 != 0)
        return bad(r, "not whole blocks");
    if (m == KD_GCM && (!r->have_tag || v->taglen == 0 || v->taglen > 16))
        return bad(r, "missing or bad tag");
    if (m != KD_GCM && (v->fail || v->aadlen || r->have_tag))
        return bad(r, "AAD, tag or FAIL outside GCM");
    if (l->n == l->cap) {
        kat_vector *nv = realloc(l->v, (l->cap = l->cap ? 2 * l->cap : 64) * sizeof(*nv));

        if (nv == NULL)
            return bad(r, "out of memory");
        l->v = nv;
    }
    l->v[l->n++] = *v;
    memset(v, 0, sizeof(*v));        /* the list owns the buffers now */
    return 1;
}

/* ASCII case-insensitive equality (strcasecmp is POSIX, not C11). */
static int same(const char *a, const char *b)
{
    while (*a && toupper((unsigned char)*a) == toupper((unsigned char)*b))
        a++, b++;
    return *a == '\0' && *b == '\0';
}

static int take(record *r, unsigned char **buf, size_t *len, int *have, const char *hex)
{
    if (*buf != NULL)
        return bad(r, "field given twice");
    if ((*buf = test_unhex(hex, len)) == NULL)
        return bad(r, "bad hex");
    *have = 1;
    return 1;
}

static int field(record *r, const char *name, const char *hex)
{
    kat_vector *v = &r->v;
    int have_aad = 0;

    if (same(name, "COUNT"))
        return 1;
    if (same(name, "KEY"))
        return take(r, &v->key, &v->keylen, &r->have_key, hex);
    if (same(name, "IV"))
        return take(r, &v->iv, &v->ivlen, &r->have_iv, hex);
    if (same(name, "PLAINTEXT") || same(name, "PT"))
        return take(r, &v->pt, &v->ptlen, &r->have_pt, hex);
    if (same(name, "CIPHERTEXT") || same(name, "CT"))
        return take(r, &v->ct, &v->ctlen, &r->have_ct, hex);
    if (same(name, "AAD"))
        return take(r, &v->aad, &v->aadlen, &have_aad, hex);
    if (same(name, "TAG"))
        return take(r, &v->tag, &v->taglen, &r->have_tag, hex);
    if (same(name, "MODE")) {
        for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
            if (same(hex, mode_names[i].name)) {
                r->mode = (int)mode_names[i].mode;
                return 1;
            }
        return bad(r, "unknown MODE");
    }
    return bad(r, "unknown field");
}

/* Strips trailing CR/LF/blanks and leading blanks in place. */
static char *trim(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

static int parse_line(record *r, kat_list *l, char *s, int file_mode)
{
    char *eq;

    if (*s == '\0' || *s == '#')
        return *s == '\0' ? finish(r, l) : 1;   /* a blank line ends a record */
    if (*s == '[')
        return finish(r, l);                    /* [ENCRYPT], [Keylen = 128], ... */
    if (strcmp(s, "FAIL") == 0) {
        r->v.fail = 1;
        return r->open ? 1 : bad(r, "FAIL outside a record");
    }
    if ((eq = strchr(s, '=')) == NULL)
        return bad(r, "unparsable line");
    *eq = '\0';
    s = trim(s);
    if (same(s, "COUNT")) {
        if (!finish(r, l))
            return 0;
        memset(&r->v, 0, sizeof(r->v));
        r->v.file = r->file;
        r->v.line = r->cur;
        r->mode = file_mode;
        r->open = 1;
        r->have_key = r->have_iv = r->have_pt = r->have_ct = r->have_tag = 0;
    } else if (!r->open) {
        return bad(r, "field outside a record");
    }
    return field(r, s, trim(eq + 1));
}

int kat_load(const char *dir, const kat_file *f, kat_list *out)
{
    static char line[1 << 16];
    char path[4096];
    record r;
    FILE *fp;
    int ok = 1;

    memset(out, 0, sizeof(*out));
    memset(&r, 0, sizeof(r));
    r.file = f->path;
    snprintf(path, sizeof(path), "%s/%s", dir, f->path);
    if ((fp = fopen(path, "r")) == NULL) {
        perror(path);
        return 0;
    }
    while (ok && fgets(line, sizeof(line), fp) != NULL) {
        r.cur++;
        if (strchr(line, '\n') == NULL && !feof(fp))
            ok = bad(&r, "line too long");
        else
            ok = parse_line(&r, out, trim(line), f->mode);
    }
    if (ok)
        ok = finish(&r, out);
    vector_free(&r.v);
    fclose(fp);
    if (!ok)
        kat_free(out);
    return ok;
}

void kat_free(kat_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        vector_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}
