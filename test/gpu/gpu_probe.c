/* gpu_probe.c - for scripts and users: prints the GPU gpuaes uses (it waits for
 * the start-up); exit 0 when there is one, 77 (skip) when not, with the reason. */
#include <stdio.h>
#include "testutil.h"

int main(void)
{
    test_env env;
    char *desc = NULL;
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_ptr("gpu", &desc, 0), OSSL_PARAM_END };

    if (!test_env_open(&env))
        return 1;
    test_require_gpu(&env);          /* exits 77 without a GPU */
    OSSL_PROVIDER_get_params(env.gpuaes, p);
    printf("gpu available: %s\n", desc != NULL ? desc : "?");
    test_env_close(&env);
    return 0;
}
