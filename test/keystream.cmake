# Keystream ahead (CTR): differential tests against the default provider with
# small knobs, so that windows turn over constantly (docs/DESIGN.md,
# "Keystream ahead").  Labelled gpu: the _emu twin runs them against the
# emulated GPU layer, whose windows become ready only on the second poll.
gpuaes_test_program(test_keystream test_keystream.c)
# Up to 16 keystream contexts at once (keystream_max_contexts; the default is 2): concurrency is what these test.
set(_ks_env "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=1M;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
gpuaes_test(NAME keystream COMMAND test_keystream --gpu --threads 8 LABELS gpu TIMEOUT 600
  ENV "${_ks_env}")
# Windows of one block and an odd size: every update crosses windows.
gpuaes_test(NAME keystream_tiny COMMAND test_keystream --gpu --threads 4 LABELS gpu TIMEOUT 600
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=0;GPUAES_KEYSTREAM_MAX_WINDOW=4112;GPUAES_KEYSTREAM_TOTAL_BYTES=64K;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
# A GPU failure in the keystream path: output stays right (CPU), error counted.
gpuaes_test(NAME keystream_fault COMMAND test_keystream --threads 2 LABELS gpu TIMEOUT 600
  ENV "${_ks_env};GPUAES_FAULT=sync")
# Off, and no GPU: the same contexts on the CPU path.
gpuaes_test(NAME keystream_off COMMAND test_keystream --threads 2 TIMEOUT 600
  ENV "${_ks_env};GPUAES_KEYSTREAM=0")

# The window API of the GPU layer itself (ctr32 and ctr128 at the top of
# their range, every key size, concurrent fills): once against the real
# layer (gpu), once against the emulator.
add_executable(test_ks_api test_ks_api.c)
target_include_directories(test_ks_api PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_ks_api PRIVATE testsupport gpuaes_cuda CUDA::cudart_static OpenSSL::Crypto Threads::Threads)
add_executable(test_ks_api_emu test_ks_api.c gpu_emulator.c)
target_include_directories(test_ks_api_emu PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_ks_api_emu PRIVATE testsupport OpenSSL::Crypto Threads::Threads)
add_test(NAME ks_api COMMAND test_ks_api)
set_tests_properties(ks_api PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME ks_api_emu COMMAND test_ks_api_emu)
set_tests_properties(ks_api_emu PROPERTIES LABELS emu TIMEOUT 300)

# The lifecycle of keystream contexts and windows (test_ks_life.c): large
# updates after keystream mode, final, and the window pool's bound.
gpuaes_test_program(test_ks_life test_ks_life.c)
set(_life_env "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=16M")
foreach(t jump mixed final)
  gpuaes_test(NAME ks_life_${t} COMMAND test_ks_life ${t} --gpu LABELS gpu TIMEOUT 300
    ENV "${_life_env};GPUAES_KEYSTREAM_MAX_CONTEXTS=1")
endforeach()
# 256 KiB windows: freeing a context's windows takes long enough for a race
# with another context's entry to show.
gpuaes_test(NAME ks_life_pool COMMAND test_ks_life pool --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=256K;GPUAES_KEYSTREAM_TOTAL_BYTES=64M;GPUAES_KEYSTREAM_MAX_CONTEXTS=2")

# exit() while threads XOR against keystream windows (test_ks_exit.c): the
# exit-time release must neither crash them nor let them emit plaintext.
gpuaes_test_program(test_ks_exit test_ks_exit.c)
gpuaes_test(NAME ks_exit COMMAND test_ks_exit --gpu LABELS gpu TIMEOUT 600
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=16K;GPUAES_KEYSTREAM_MAX_WINDOW=256K;GPUAES_KEYSTREAM_TOTAL_BYTES=64M;GPUAES_KEYSTREAM_MAX_CONTEXTS=16")
