/*
 * test_counter.c - the counter module (include/gpuaes_counter.h) against an
 * independent oracle: the counter block as an unsigned __int128.
 *  - 128-bit add: carries across every byte boundary (the low k bytes 0xff,
 *    +1 and +n that crosses 2^(8k)), the 2^128 wrap, n up to 2^64 - 1;
 *  - sub1: borrows across every byte boundary, 0 - 1 = 2^128 - 1;
 *  - inc32: the 2^32 wrap leaves the upper 96 bits as they are (also when
 *    they are all ones), n counts mod 2^32, blocks to the wrap;
 *  - the kernels' column form (ctr128_cols, ctr32_cols) against the byte form;
 *  - round trips: add then sub1 back, sub1 then add 1.
 * CPU only; no GPU, no OpenSSL.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "gpuaes_counter.h"
#include "rng.h"

typedef unsigned __int128 u128;

static rng_state rng = { 0x636f756e746572 };   /* "counter": every run checks the same values */

static uint64_t rnd(void) { return rng_next(&rng); }

static u128 load(const unsigned char c[16])
{
    u128 v = 0;

    for (int i = 0; i < 16; i++)
        v = (v << 8) | c[i];
    return v;
}

static void store(unsigned char c[16], u128 v)
{
    for (int i = 15; i >= 0; i--, v >>= 8)
        c[i] = (unsigned char)v;
}

static void random_block(unsigned char c[16])
{
    uint64_t a = rnd(), b = rnd();

    memcpy(c, &a, 8);
    memcpy(c + 8, &b, 8);
}

/* A counter whose low k bytes are 0xff (the next +1 carries out of byte 16-k). */
static void ones_below(unsigned char c[16], int k)
{
    random_block(c);
    if (k < 16)
        c[15 - k] &= 0xfe;            /* the carry stops at this byte */
    memset(c + 16 - k, 0xff, (size_t)k);
}

/* c + n through the module equals the oracle's, and so do the columns. */
static void check_add(const unsigned char c0[16], uint64_t n)
{
    unsigned char c[16], want[16];
    uint32_t b[4], s[4], w[4];

    memcpy(c, c0, 16);
    gpuaes_ctr128_add(c, n);
    store(want, load(c0) + n);
    CHECKF(memcmp(c, want, 16) == 0, "ctr128_add(.., %llu)", (unsigned long long)n);
    if (n <= UINT32_MAX) {
        gpuaes_ctr_columns(c0, b);
        gpuaes_ctr128_cols(b, (uint32_t)n, &s[0], &s[1], &s[2], &s[3]);
        gpuaes_ctr_columns(want, w);
        CHECKF(memcmp(s, w, 16) == 0, "ctr128_cols(.., %llu)", (unsigned long long)n);
    }
}

/* inc32 n times: the low 32 bits mod 2^32, the upper 96 bits untouched. */
static void check_inc32(const unsigned char c0[16], uint64_t n)
{
    unsigned char c[16], want[16];
    uint32_t b[4], s[4], w[4];
    u128 v = load(c0), hi = v >> 32 << 32;

    memcpy(c, c0, 16);
    gpuaes_ctr32_add(c, n);
    store(want, hi | (uint32_t)((uint32_t)v + (uint32_t)n));
    CHECKF(memcmp(c, want, 16) == 0, "ctr32_add(.., %llu)", (unsigned long long)n);
    CHECKF(memcmp(c, c0, 12) == 0, "ctr32_add touched the upper 96 bits");
    CHECKF(gpuaes_ctr32_get(c) == (uint32_t)((uint32_t)v + (uint32_t)n), "ctr32_get");
    if (n <= UINT32_MAX) {
        gpuaes_ctr_columns(c0, b);
        gpuaes_ctr32_cols(b, (uint32_t)n, &s[0], &s[1], &s[2], &s[3]);
        gpuaes_ctr_columns(want, w);
        CHECKF(memcmp(s, w, 16) == 0, "ctr32_cols(.., %llu)", (unsigned long long)n);
    }
}

static void byte_boundaries(void)
{
    unsigned char c[16];

    for (int k = 0; k <= 16; k++) {   /* k = 16: all ones, the 2^128 wrap */
        for (int rep = 0; rep < 64; rep++) {
            ones_below(c, k);
            check_add(c, 1);
            check_add(c, 2);
            check_add(c, 0xff);
            check_add(c, rnd() >> (rnd() % 64));
            check_add(c, rnd());
            check_add(c, UINT64_MAX);
        }
    }
    /* n alone crossing each boundary: 2^(8k) - 1 + 1 from a counter of 1. */
    memset(c, 0, 16);
    c[15] = 1;
    for (int k = 1; k < 8; k++)
        check_add(c, ((uint64_t)1 << (8 * k)) - 1);
    check_add(c, UINT64_MAX);
}

static void wrap128(void)
{
    unsigned char c[16], zero[16] = { 0 }, ones[16];

    memset(ones, 0xff, 16);
    memset(c, 0xff, 16);
    gpuaes_ctr128_add(c, 1);
    CHECKF(memcmp(c, zero, 16) == 0, "2^128 - 1 + 1 != 0");
    for (uint64_t k = 1; k < 300; k++) {   /* 2^128 - k + n for n around k */
        store(c, (u128)0 - k);
        check_add(c, k - 1);
        check_add(c, k);
        check_add(c, k + 1);
        check_add(c, k + 1000);
    }
    memset(c, 0, 16);
    gpuaes_ctr128_sub1(c);
    CHECKF(memcmp(c, ones, 16) == 0, "0 - 1 != 2^128 - 1");
}

static void sub1(void)
{
    unsigned char c[16], want[16];

    for (int k = 0; k <= 16; k++) {    /* the low k bytes zero: the borrow crosses them */
        for (int rep = 0; rep < 64; rep++) {
            u128 v;

            random_block(c);
            if (k < 16)
                c[15 - k] |= 1;
            memset(c + 16 - k, 0, (size_t)k);
            v = load(c);
            gpuaes_ctr128_sub1(c);
            store(want, v - 1);
            CHECKF(memcmp(c, want, 16) == 0, "sub1 with %d low zero bytes", k);
        }
    }
}

static void round_trips(void)
{
    unsigned char c0[16], c[16];

    for (int rep = 0; rep < 2000; rep++) {
        int k = rep % 17;
        uint64_t n = rep % 2 ? 1 + rnd() % 40 : 1;

        ones_below(c0, k);
        if (rep % 3 == 0)
            memset(c0 + 16 - k, 0, (size_t)k);   /* borrows too */
        memcpy(c, c0, 16);
        gpuaes_ctr128_add(c, n);
        for (uint64_t i = 0; i < n; i++)
            gpuaes_ctr128_sub1(c);
        CHECKF(memcmp(c, c0, 16) == 0, "add %llu then sub1 x %llu", (unsigned long long)n,
               (unsigned long long)n);
        gpuaes_ctr128_sub1(c);
        gpuaes_ctr128_add(c, 1);
        CHECKF(memcmp(c, c0, 16) == 0, "sub1 then add 1");
    }
}

static void inc32(void)
{
    unsigned char c[16];

    for (int rep = 0; rep < 512; rep++) {
        random_block(c);
        if (rep % 2)
            memset(c, 0xff, 12);              /* a carry out of bit 32 would show */
        for (int k = 0; k <= 4; k++) {        /* the low k bytes of the 32 bits 0xff */
            memset(c + 16 - k, 0xff, (size_t)k);
            check_inc32(c, 1);
            check_inc32(c, rnd() % 4096);
            check_inc32(c, (uint32_t)rnd());
            check_inc32(c, UINT32_MAX);
            check_inc32(c, rnd());            /* only n mod 2^32 counts */
            check_inc32(c, ((uint64_t)1 << 32) + 1);
        }
        memset(c + 12, 0xff, 4);
        CHECKF(gpuaes_ctr32_to_wrap(c) == 1, "to_wrap at 2^32 - 1");
        memset(c + 12, 0, 4);
        CHECKF(gpuaes_ctr32_to_wrap(c) == (uint64_t)1 << 32, "to_wrap at 0");
        c[15] = 5;
        CHECKF(gpuaes_ctr32_to_wrap(c) == ((uint64_t)1 << 32) - 5, "to_wrap at 5");
        /* counting exactly to_wrap blocks lands on 0 in the low 32 bits */
        random_block(c);
        {
            unsigned char d[16];

            memcpy(d, c, 16);
            gpuaes_ctr32_add(d, gpuaes_ctr32_to_wrap(c));
            CHECKF(gpuaes_ctr32_get(d) == 0 && memcmp(d, c, 12) == 0, "to_wrap blocks reach the wrap");
        }
    }
}

static void columns(void)
{
    unsigned char c[16];
    uint32_t w[4];

    for (int i = 0; i < 16; i++)
        c[i] = (unsigned char)(i + 1);
    gpuaes_ctr_columns(c, w);
    CHECKF(w[0] == 0x01020304u && w[1] == 0x05060708u && w[2] == 0x090a0b0cu && w[3] == 0x0d0e0f10u,
           "columns are big-endian words in order");
}

int main(void)
{
    byte_boundaries();
    wrap128();
    sub1();
    round_trips();
    inc32();
    columns();
    return check_report("test_counter");
}
