/*
 * loaded_object.c - which loaded object (executable or shared library) holds
 * an address.  dl_iterate_phdr, not dladdr: dladdr also looks for the nearest
 * symbol, which cost every provider load 0.37M instructions in libcrypto's
 * symbol table.
 */
#define _GNU_SOURCE                   /* dl_iterate_phdr */
#include <link.h>

#include <stddef.h>

#include "debug.h"

struct object_query {
    uintptr_t addr;
    int found;
    uintptr_t base;
    const char *path;
};

static int match(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct object_query *q = arg;

    (void)size;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = (uintptr_t)info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type == PT_LOAD && q->addr >= start && q->addr - start < ph->p_memsz) {
            q->found = 1;
            q->base = (uintptr_t)info->dlpi_addr;
            q->path = info->dlpi_name;
            return 1;
        }
    }
    return 0;
}

int loaded_object(const void *addr, uintptr_t *base, const char **path)
{
    struct object_query q = { (uintptr_t)addr, 0, 0, NULL };

    dl_iterate_phdr(match, &q);
    if (base != NULL)
        *base = q.base;
    if (path != NULL)
        *path = q.found && q.path != NULL && q.path[0] != '\0' ? q.path : NULL;
    return q.found;
}
