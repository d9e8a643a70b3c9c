// copy_part.h - copying one part of a staging copy (copy_pool.h's
// CopyTask): memcpy, non-temporal stores, the XOR against keystream, and
// zeroing the staging operand as it is read (cuda/ internal; plain C++).
#ifndef GPUAES_COPY_PART_H
#define GPUAES_COPY_PART_H

#include "copy/copy_pool.h"

namespace gpuaes {

// Copies part k of t (0 <= k < t->nparts) as its flags ask.  Parts start at
// k * t->part, moved down so that no cache line of dst is written by two
// parts.
void copy_part(const CopyTask *t, int k);

} // namespace gpuaes

#endif
