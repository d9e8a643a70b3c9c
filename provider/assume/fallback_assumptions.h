/*
 * fallback_assumptions.h - what gpuaes assumes about the default provider's
 * ciphers beyond what the provider API promises, each written once.
 *
 * gpuaes keeps a context of the default provider in step with the GPU path
 * (provider/block/cipher_block.c and block_*.c, provider/gcm/cipher_gcm.c and
 * gcm_engine.c).  Each line below is a
 * behaviour it relies on; a libcrypto that behaves otherwise would make
 * gpuaes answer wrongly without an error.  Each has a check of the same name
 * in provider/assume/assume_block.c or assume_gcm.c (the table: assumptions.c), run
 * by test/unit/test_assumptions.c (every check,
 * CI) and, those marked "load", when the provider loads: a failure there
 * turns the GPU path off (gpuaes then only forwards to the default provider)
 * with an error on the queue and a debug line.  The code that relies on one
 * names its identifier in a comment.  A check marked "load" runs in every
 * process that loads gpuaes: it must stay a few blocks of work and draw no
 * random numbers (that instantiates the fallback's DRBG: 0.6 ms a load).
 *
 * ASSUME_REINIT_KEEPS_SCHEDULE (load)
 *   An init with key NULL keeps the key schedule of the last keyed init (CBC,
 *   CFB, CTR, GCM).  block_fb_resync and everything built on it
 *   (gpu_whole_blocks, block_gpu_update_ecb_cbc, ks_sync_fb); GCM's seg_feed
 *   and cpu_ctr32.
 * ASSUME_INIT_RESETS_STREAM (load)
 *   Every successful init empties the ECB/CBC block buffer and sets num to 0;
 *   CTR and CFB restart at the IV given, with no partial block.  block_fb_resync,
 *   block_init (nheld = 0), ks_sync_fb.
 * ASSUME_INIT_KEEPS_PADDING (load)
 *   An init without parameters keeps the padding setting.  block_fb_resync.
 * ASSUME_PADDING_MIDSTREAM (load)
 *   Padding set between updates applies from the next update on: ECB/CBC
 *   decryption without padding holds no block back, with padding the last
 *   one; final then unpads it.  gpu_whole_blocks, block_gpu_update_ecb_cbc.
 * ASSUME_BLOCK_BUFFER_RULE (load)
 *   After an ECB/CBC context has taken `total` bytes since init it has output
 *   the first total - keep of them (processed) and holds the last keep, where
 *   keep = total % 16, or 16 when total % 16 == 0, total > 0, decrypting with
 *   padding.  held_after, track_held, sync_held, gpu_update_stale,
 *   block_gpu_update_ecb_cbc.
 * ASSUME_UPDATED_IV (load)
 *   OSSL_CIPHER_PARAM_UPDATED_IV is the chaining state of the next byte: CBC
 *   the last ciphertext block processed (held bytes are not), CFB the shift
 *   register (the last ciphertext block, at a block boundary), CTR the counter
 *   of the next keystream block to make (with num > 0: the current block's + 1).
 *   An init with it continues the stream.  block_gpu_update_ecb_cbc,
 *   block_gpu_update_cfb_ctr, ks_begin.
 * ASSUME_NUM_PARAM (load)
 *   OSSL_CIPHER_PARAM_NUM is CTR's and CFB's byte position in the current
 *   block; ECB and CBC keep it as a settable value that updates leave alone
 *   (block_fb_resync saves and restores it).  block_gpu_update_cfb_ctr, ks_begin.
 * ASSUME_CTR_128BIT_COUNTER (load)
 *   CTR increments the whole 16-byte counter (big-endian, carrying through all
 *   bytes, wrapping at 2^128).  gpuaes_ctr128_add/_sub1 (gpuaes_counter.h),
 *   the GPU's GPUAES_CTR128.
 * ASSUME_CTR_SCRATCH_REBUILDS_PARTIAL (load)
 *   A CTR context initialised at counter C and fed p (< 16) scratch bytes is
 *   where one is that did the first p bytes of C's block (keystream, num,
 *   updated IV).  ks_sync_fb.
 * ASSUME_REINIT_RESTORES_IV (load)
 *   An init with iv NULL restarts CBC and CFB at the IV of the last init that
 *   had one; CTR goes on from its counter (the updated IV) with num 0.
 *   block_init (gives CBC/CFB that IV itself: the fallback's copy is
 *   overwritten by block_fb_resync; brings a keystream context to its position).
 * ASSUME_INIT_OK (load)
 *   An ECB, CBC, CFB or CTR init without parameters, with a key of the
 *   variant's length or none and a 16-byte IV or none (ECB: none), succeeds
 *   in any state, in either direction (the default provider's generic init
 *   then only copies and expands).  block_init (its tail call: the context's
 *   state is ours before the call).
 * ASSUME_IV_PARAM_IS_ORIGINAL (load)
 *   OSSL_CIPHER_PARAM_IV is the IV given at init, not the running state.
 *   block_get_ctx_params (answers with its own copy after a resync), init_failed.
 * ASSUME_LENGTH_PARAMS (load)
 *   KEYLEN is the variant's key length, in every state, whatever is set; so
 *   is IVLEN, 0 for ECB and 16 for CBC, CFB and CTR; GCM's IVLEN is 12 on a
 *   new context, then the length last given, as AEAD_IVLEN or with an IV at
 *   init (gcm_ctx's ivlen mirrors it).  length_params.h: get_ctx_params
 *   answers these itself.
 * ASSUME_SHARED_PARAM_TABLES
 *   The gettable/settable parameter lists are the same for every block-mode
 *   variant, and for every GCM variant, and ignore the context passed.
 *   FAMILY_PARAM_TABLES (cipher_family.h).
 * ASSUME_GCM_IV_BUFFERED (load)
 *   GCM applies an IV at the message's first non-empty AAD or data update;
 *   until then a keyed init without IV starts the message with that IV under
 *   the new key.  gcm_init, iv_buffered.
 * ASSUME_GCM_IV_INIT_OK (load)
 *   A GCM init with a 12-byte IV alone (no key, no parameters) succeeds in
 *   any state, in either direction.  gcm_init (its tail call: the message
 *   state is ours before the call).
 * ASSUME_GCM_REKEY_RESETS_MESSAGE (load)
 *   A keyed init without IV on a GCM context whose message has started leaves
 *   the same state whatever the message held (the state is zeroed, the message
 *   not restarted), so one byte of AAD brings a context whose IV is still
 *   buffered to that point.  gcm_init.
 * ASSUME_GCM_SEGMENT_GHASH (load)
 *   A GCM context with key K, initialised (key NULL) with the all-zero 96-bit
 *   IV and given b bytes, in any pieces, only as AAD, gives at final (out NULL)
 *   the tag (S ^ [8b]_64 || 0^64) * H ^ E_K(0^96 || 1), S the GHASH of the
 *   zero-padded bytes; the same init after final starts afresh.  seg_feed,
 *   seg_close, engine_key (gcm_engine.c).
 * ASSUME_GCM_DUP_FINAL_TAG (load)
 *   A copy (dupctx) of a GCM context in the middle of a message (also before
 *   its first data, after AAD or none, the IV still buffered), made an
 *   encrypting one by an init without key or IV (a decrypting one too), gives
 *   at final the tag of the message so far, as if it ended there (the
 *   decrypting one's GHASH is of the ciphertext it was given); the original
 *   goes on unchanged.  gcm_engine_adopt (gcm_engine.c).
 * ASSUME_GCM_FUSED_PIECE (load)
 *   A GCM context given AEAD_IVLEN 16 before any IV, then (either direction)
 *   a 16-byte IV, whole blocks of data and no AAD, XORs the keystream from
 *   inc32(J0), J0 = GHASH_H(IV || 0^64 || [128]_64), wrapping as inc32, and
 *   (made an encrypting one by an init without key or IV when decrypting)
 *   gives at final the tag (S ^ [0]_64 || [8 len]_64) * H ^ E_K(J0), S the
 *   GHASH of the ciphertext; the next init with an IV starts afresh.
 *   gcm_fused_run (gcm_fused.c): an engine message's CPU blocks in one pass.
 * ASSUME_GCM_EMPTY_UPDATE_OK (load)
 *   A GCM update of 0 bytes succeeds (outl 0) in any state.  update_engine.
 * ASSUME_GCM_AAD_BEFORE_DATA (load)
 *   AAD after data is refused.  update_engine.
 * ASSUME_GCM_DECRYPT_NEEDS_TAG (load)
 *   A decrypting final without a tag fails and leaves the message open (a
 *   final after setting the tag verifies).  gcm_engine_final.
 * ASSUME_GCM_FINISHED_UNTIL_IV (load)
 *   After a successful final, data updates and finals fail until an init with
 *   an IV, a keyed init without IV included.  gcm_init, update_engine, gcm_final.
 * ASSUME_GCM_FAILED_FINAL_CONTINUES (load)
 *   After a failed final (wrong tag) data still flows, the keystream going on
 *   where it was, and no later final succeeds.  gcm_engine_final, update_engine.
 * ASSUME_GCM_IVLEN_VOIDS_IV (load)
 *   A new context's IV length is 12; setting a different AEAD_IVLEN after an
 *   IV makes data updates fail until an init with an IV; setting the same
 *   one changes nothing.  gcm_newctx, note_params.
 * ASSUME_GCM_TAG_GET (load)
 *   After an encrypting final, AEAD_TAG of n = 1..16 bytes gives the tag's
 *   first n; a buffer of 0 or more than 16 bytes, or a decrypting context,
 *   fails.  (A NULL buffer is the fallback's to answer, gpuaes forwards it:
 *   OpenSSL 3.0 refuses it, 4.0 leaves it untouched and succeeds.)
 *   gcm_get_ctx_params.
 * ASSUME_UNKNOWN_PARAMS_IGNORED (load)
 *   get_ctx_params leaves entries with keys it does not know untouched and
 *   does not fail for them.  gcm_get_ctx_params (renames the tag it answered).
 * ASSUME_GCM_CIPHER_FORMS (load)
 *   GCM's cipher function takes out NULL as AAD and in NULL as final; its
 *   update takes in NULL with a length as final too.  gcm_cipher, update_engine.
 * ASSUME_GCM_TLS_AAD_PAD (load)
 *   After a TLS1_AAD set that succeeded, AEAD_TLS1_AAD_PAD is 16 (the tag's
 *   length), either direction, through records, refused TLS AADs, re-keys
 *   and copies.  note_params (tlspad), length_params.h.
 * ASSUME_GCM_PARAMS_IN_ORDER (load)
 *   A GCM set_ctx_params takes tag, ivlen, tlsaad, ... in that order until one
 *   is refused, keeping those before; a refused tag's bytes overwrite the
 *   tag, a refused 13-byte TLS AAD leaves TLS mode on.  note_params_failed.
 *
 * Considered and not listed (no wrong answer if they change): a re-init that
 * flips the ECB/CBC direction without a key keeps the schedule (gpu_capable
 * keeps such contexts on the CPU either way); what a failed init or
 * set_ctx_params applied (read back: init_failed, note_params_failed); the
 * default provider's algorithm names (fallback_load fails loudly).  Not
 * pinned: GCM's 2^36 - 32 byte message limit (GCM_MAX_DATA; testing it takes
 * 64 GiB), dupctx copying the whole state (the provider API promises it).
 */
#ifndef GPUAES_FALLBACK_ASSUMPTIONS_H
#define GPUAES_FALLBACK_ASSUMPTIONS_H

#include <stddef.h>

/* X(identifier, checked at load) */
#define GPUAES_ASSUMPTIONS(X)                           \
    X(REINIT_KEEPS_SCHEDULE, 1)                         \
    X(INIT_RESETS_STREAM, 1)                            \
    X(INIT_KEEPS_PADDING, 1)                            \
    X(PADDING_MIDSTREAM, 1)                             \
    X(BLOCK_BUFFER_RULE, 1)                             \
    X(UPDATED_IV, 1)                                    \
    X(NUM_PARAM, 1)                                     \
    X(CTR_128BIT_COUNTER, 1)                            \
    X(CTR_SCRATCH_REBUILDS_PARTIAL, 1)                  \
    X(REINIT_RESTORES_IV, 1)                            \
    X(INIT_OK, 1)                                       \
    X(IV_PARAM_IS_ORIGINAL, 1)                          \
    X(LENGTH_PARAMS, 1)                                 \
    X(SHARED_PARAM_TABLES, 0)                           \
    X(GCM_IV_BUFFERED, 1)                               \
    X(GCM_IV_INIT_OK, 1)                                \
    X(GCM_REKEY_RESETS_MESSAGE, 1)                      \
    X(GCM_SEGMENT_GHASH, 1)                             \
    X(GCM_DUP_FINAL_TAG, 1)                             \
    X(GCM_FUSED_PIECE, 1)                               \
    X(GCM_EMPTY_UPDATE_OK, 1)                           \
    X(GCM_AAD_BEFORE_DATA, 1)                           \
    X(GCM_DECRYPT_NEEDS_TAG, 1)                         \
    X(GCM_FINISHED_UNTIL_IV, 1)                         \
    X(GCM_FAILED_FINAL_CONTINUES, 1)                    \
    X(GCM_IVLEN_VOIDS_IV, 1)                            \
    X(GCM_TAG_GET, 1)                                   \
    X(UNKNOWN_PARAMS_IGNORED, 1)                        \
    X(GCM_CIPHER_FORMS, 1)                              \
    X(GCM_PARAMS_IN_ORDER, 1)                           \
    X(GCM_TLS_AAD_PAD, 1)

typedef enum {
#define ASSUME_ENUM(id, at_load) ASSUME_##id,
    GPUAES_ASSUMPTIONS(ASSUME_ENUM)
#undef ASSUME_ENUM
    ASSUME_COUNT
} gpuaes_assumption;

/* One run of one check against the default provider (a gpuaes_prov's fallbacks). */
typedef struct assume_run {
    void *provctx;                    /* the default provider's context */
    const fallback_cipher *fallbacks; /* its functions, per variant (gpuaes_prov's) */
    unsigned flip;                    /* tests: the flip-th expectation is inverted (0: none) */
    unsigned seen;                    /* expectations evaluated */
    char why[160];                    /* the first expectation that failed */
} assume_run;

const char *assume_name(gpuaes_assumption a);
int assume_at_load(gpuaes_assumption a);
/* 1: the default provider behaves as assumed; 0: see r->why. */
int assume_check(gpuaes_assumption a, assume_run *r);

/* At load, after fallback_load: runs the checks marked "load"; if one fails,
 * turns prov's GPU path off (thresholds never, no keystream), with an error
 * on the queue and a debug line naming it.  Returns whether all held. */
struct gpuaes_prov;
int assume_verify_at_load(struct gpuaes_prov *prov);
/* The first check marked "load" that prov's fallback fails (r says why), or -1. */
int assume_first_failure(const struct gpuaes_prov *prov, assume_run *r);

#endif
