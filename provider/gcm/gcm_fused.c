/*
 * gcm_fused.c - whole blocks of a GCM message on the CPU in one stitched pass
 * of the default provider's AES-GCM, from any counter block.
 *
 * The default provider's GCM starts a message's data at inc32(J0), and J0 is
 * the IV's own for 96 bits but GHASH_H(IV || 0^64 || [128]_64) = (IV * H ^ Lv)
 * * H for a 16-byte IV (SP 800-38D, 7.1; Lv = [0]_64 || [128]_64).  That can
 * be solved for the IV: to start at counter block C, J0' = C - 1 (inc32) and
 * IV = (J0' * H^-1 ^ Lv) * H^-1.  Such a context, fed the blocks as data and
 * no AAD, XORs exactly the message's keystream, and its tag is
 * tag' = (S ^ L') * H ^ E_K(J0'), L' = [0]_64 || [8 len]_64, S the GHASH from
 * zero of the ciphertext; so S * H = tag' ^ E_K(J0') ^ L' * H, which is what
 * gcm_engine.c folds into its Y, as for a GPU piece.  A decrypting context
 * gives no tag: it is made an encrypting one by an init without key or IV
 * first (ASSUME_GCM_DUP_FINAL_TAG); its GHASH of the ciphertext is the same.
 * (ASSUME_GCM_FUSED_PIECE)
 *
 * Before, the engine ran such blocks as AES-CTR and then the segment's GHASH
 * (gcm_engine.c): two passes over the data at well under the default
 * provider's speed where its GCM is stitched (VAES), which is why a message
 * once on the engine could not leave the GPU.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>

#include "gcm_fused.h"
#include "gcm_math.h"
#include "gpuaes_counter.h"
#include "wipe.h"

#define BLOCK 16

/* Runs of whole blocks at least this long take the stitched pass: below it
 * its fixed cost (an ECB block, three products, a GCM init with its IV's
 * GHASH, final and tag: ~0.5 us) outweighs the second pass it saves.
 * bench/gcm_engine_cpu on the CPU machine (AMD EPYC, OpenSSL 3.0.19, whose
 * GCM there is barely faster than AES-CTR plus a GHASH pass), AES-256-GCM,
 * GB/s default provider / stitched / CTR + GHASH: 4 KiB 4.46 / 2.83 / 3.97,
 * 16 KiB 4.58 / 3.98 / 4.21, 64 KiB 4.61 / 4.41 / 4.27, 1 MiB 4.61 / 4.58 /
 * 4.27.  Where the default provider's GCM is stitched with VAES (the H200
 * machine: 15.8 GB/s against AES-CTR's 8.3) the two passes are at most half
 * its speed, and the crossover lower.  The emulated module only:
 * GPUAES_TEST_FUSED_MIN lowers it, so that the differential tests run every
 * CPU run of an engine message through the stitched pass. */
size_t gcm_fused_min(void)
{
#ifdef GPUAES_TEST_HOOKS
    const char *v = getenv("GPUAES_TEST_FUSED_MIN");

    if (v != NULL)
        return (size_t)strtoull(v, NULL, 0);
#endif
    return 65536;
}

int gcm_fused_key(gcm_fused *f, void *provctx, const unsigned char *key, size_t keylen)
{
    size_t ivlen = BLOCK;
    OSSL_PARAM p[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen), OSSL_PARAM_END };

    f->ready = 0;
    if (f->ctx == NULL && (f->ctx = f->gcm->newctx(provctx)) == NULL)
        return 0;
    /* the IV length before any IV (ASSUME_GCM_IVLEN_VOIDS_IV) */
    if (!gf128_inv(f->hinv, f->h) || !f->gcm->set_ctx_params(f->ctx, p)
        || !f->gcm->einit(f->ctx, key, keylen, NULL, 0, NULL))
        return 0;
    f->ready = 1;
    return 1;
}

int gcm_fused_run(gcm_fused *f, int enc, const unsigned char ctr[BLOCK], unsigned char *out,
                  const unsigned char *in, size_t len, unsigned char sh[BLOCK])
{
    unsigned char j0[BLOCK], iv[BLOCK], ek[BLOCK], l[BLOCK];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, sh, BLOCK),
                        OSSL_PARAM_END };
    size_t outl = 0;
    int ok;

    if (!f->ready || len == 0 || len % BLOCK != 0)
        return 0;
    memcpy(j0, ctr, BLOCK);
    gpuaes_ctr32_add(j0, 0xffffffffu);          /* C - 1 */
    memcpy(iv, j0, BLOCK);
    gf128_mul(iv, f->hinv);
    iv[BLOCK - 1] ^= 0x80;                      /* Lv = [0]_64 || [128]_64 */
    gf128_mul(iv, f->hinv);
    ok = f->ecb->update(f->ecbctx, ek, &outl, BLOCK, j0, BLOCK) && outl == BLOCK
        && (enc ? f->gcm->einit : f->gcm->dinit)(f->ctx, NULL, 0, iv, BLOCK, NULL)
        && f->gcm->update(f->ctx, out, &outl, len, in, len) && outl == len
        && (enc || f->gcm->einit(f->ctx, NULL, 0, NULL, 0, NULL))
        && f->gcm->final(f->ctx, NULL, &outl, 0) && f->gcm->get_ctx_params(f->ctx, p);
    if (ok) {
        gcm_len_block(l, 0, (unsigned long long)len * 8);
        gf128_mul(l, f->h);
        for (int i = 0; i < BLOCK; i++)
            sh[i] ^= ek[i] ^ l[i];
    }
    OPENSSL_cleanse(j0, sizeof(j0));
    OPENSSL_cleanse(iv, sizeof(iv));
    OPENSSL_cleanse(ek, sizeof(ek));
    OPENSSL_cleanse(l, sizeof(l));
    return ok;
}

void gcm_fused_free(gcm_fused *f)
{
    if (f->ctx != NULL)
        f->gcm->freectx(f->ctx);      /* the default provider wipes its contexts */
    wipe(f, sizeof(*f));
}
