# API-level tests (params, bad input, fork, fault injection, TLS, CLI).
# Tests labelled "gpu" exit 77 (skipped) on a host without a usable GPU.
add_library(api_util STATIC api_util.c)
target_link_libraries(api_util PUBLIC testutil OpenSSL::Crypto)

gpuaes_test_program(test_params test_params.c test_params_pv.c test_params_ctx.c test_params_gcm.c)
target_link_libraries(test_params PRIVATE api_util)
gpuaes_test(NAME params COMMAND test_params TIMEOUT 120)
gpuaes_test(NAME params_nogpu COMMAND test_params TIMEOUT 120
  ENV "GPUAES_DISABLE_GPU=1;GPUAES_OFFLOAD_MIN_BYTES=12345")
