/* gpu_probe.c - for scripts: exit 0 when gpuaes has a usable GPU, 77 (skip) when not. */
#include <stdio.h>
#include "testutil.h"

int main(void)
{
    test_env env;

    if (!test_env_open(&env))
        return 1;
    test_require_gpu(&env);          /* exits 77 without a GPU */
    printf("gpu available\n");
    test_env_close(&env);
    return 0;
}
