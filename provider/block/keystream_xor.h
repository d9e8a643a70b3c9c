/* keystream_xor.h - keystream ahead's XOR (keystream_xor.c) and counters (block_keystream.c). */
#ifndef GPUAES_KEYSTREAM_XOR_H
#define GPUAES_KEYSTREAM_XOR_H

#include <stddef.h>
#include <stdint.h>

/* keystream_xor.c: the vectorised XOR of keystream ahead. */
void ks_xor_init(void);
void ks_xor(unsigned char *out, const unsigned char *in, const unsigned char *ks, size_t n);
/* block_keystream.c: the keystream counters (provider parameters). */
uint64_t ks_bytes_made(void);
uint64_t ks_bytes_used(void);

#endif
