/* kat_vectors.h - the vendored vector files (test/vectors) and their parser. */
#ifndef KAT_VECTORS_H
#define KAT_VECTORS_H

#include <stddef.h>

#include "kat_diff_op.h"

typedef struct {
    const char *path;          /* relative to $GPUAES_VECTORS */
    int mode;                  /* kd_mode, or -1: each record names it with MODE = */
} kat_file;

/* Every vendored file; terminated by { NULL, 0 }. */
extern const kat_file kat_files[];

typedef struct {
    const char *file;
    int line;                  /* where the record starts */
    const kd_cipher *cipher;
    unsigned char *key, *iv, *pt, *ct, *aad, *tag;
    size_t keylen, ivlen, ptlen, ctlen, aadlen, taglen;
    int fail;                  /* GCM: decryption must fail (tag mismatch) */
} kat_vector;

typedef struct {
    kat_vector *v;
    size_t n, cap;
} kat_list;

/* Parses one CAVP-style file; 0 (with a message) if unreadable or a record is malformed. */
int kat_load(const char *dir, const kat_file *f, kat_list *out);
void kat_free(kat_list *l);

#endif
