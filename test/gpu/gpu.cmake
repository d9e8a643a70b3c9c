# gpu/ - what exists to exercise the GPU layer, the real one or the one
# emulated on the CPU (gpu_emulator.c: the emulated module's layer, built in
# test/CMakeLists.txt, and gpuaesd_emu's, service/service.cmake): the layer's
# own APIs driven directly (keystream windows, registration for DMA, gpuaes as
# a guest in a CUDA program), and the GPU path's machinery through EVP (fault
# injection, GHASH split between GPU and CPU, the caller's share of GPU jobs,
# the memory cap); gpu_probe, which names the GPU gpuaes uses (the CLI test,
# scripts/demo.sh).  Included from test/CMakeLists.txt.

# gpu_probe: prints the GPU gpuaes uses, or why none (exit 77).
gpuaes_test_program(gpu_probe gpu/gpu_probe.c)

gpuaes_test_program(test_fault gpu/test_fault.c)
target_link_libraries(test_fault PRIVATE api_util)
foreach(stage alloc copyin launch copyout sync)
  gpuaes_test(NAME fault_${stage} COMMAND test_fault LABELS gpu TIMEOUT 300
    ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_FAULT=${stage}")
endforeach()

# GCM with GHASH split between GPU pieces and OpenSSL segments: small and large
# updates mixed (the threshold makes the small ones CPU pieces), and with GPU
# jobs that stop after a prefix.
gpuaes_test_program(test_gcm_ghash gpu/test_gcm_ghash.c)
target_link_libraries(test_gcm_ghash PRIVATE api_util)
gpuaes_test(NAME gcm_ghash COMMAND test_gcm_ghash TIMEOUT 300)
gpuaes_test(NAME gcm_ghash_gpu COMMAND test_gcm_ghash --gpu LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force")
gpuaes_test(NAME gcm_ghash_fault_gpu COMMAND test_gcm_ghash LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force;GPUAES_FAULT=copyout")
# A GPU that cannot run GCM (compute capability 7.5; emulated): GCM stays on the CPU.
gpuaes_test(NAME gcm_ghash_no_gcm_emu COMMAND test_gcm_ghash --no-gpu-gcm LABELS emu TIMEOUT 300
  MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV "GPUAES_OFFLOAD_MIN_BYTES=4096;GPUAES_DISPATCH=force;GPUAES_EMU_NO_GCM=1")

# The caller's share of GPU jobs (gpu_cpu_share): all, it must run for every
# group; ctr (default), for CTR only; off, for none; both give the default provider's output and tags.
# Through gpuaesd (GPUAES_TEST_BACKEND=service) in 64 KiB pieces: with the
# default 8 MiB ones an H200 answers each piece while the caller still copies
# the next in, so the caller never waits and no share of GCM ran in 5 rounds
# (bench/results/README.md, earlier runs: session36-34d43d2 call A); in process the knob is not read.
gpuaes_test_program(test_cpu_share gpu/test_cpu_share.c)
target_link_libraries(test_cpu_share PRIVATE api_util)
gpuaes_test(NAME cpu_share_gpu COMMAND test_cpu_share --all LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_GPU_CPU_SHARE=all;GPUAES_SERVICE_CHUNK=64K")
gpuaes_test(NAME cpu_share_ctr_gpu COMMAND test_cpu_share --ctr LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force")
gpuaes_test(NAME cpu_share_off_gpu COMMAND test_cpu_share --off LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=0;GPUAES_DISPATCH=force;GPUAES_GPU_CPU_SHARE=off")

# gpu_memory_max: slots the cap would not hold are not made; the work goes to
# the CPU, identical, counted in gpu-memory-refusals.  2 lanes of 1 MiB make a
# slot of ~8 MiB (README, "Device memory"): 12 MiB holds one.
gpuaes_test_program(test_memcap gpu/test_memcap.c)
target_link_libraries(test_memcap PRIVATE api_util)
gpuaes_test(NAME memcap_zero COMMAND test_memcap --zero LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0;GPUAES_GPU_MEMORY_MAX=0")
gpuaes_test(NAME memcap_one COMMAND test_memcap --one LABELS gpu TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force;GPUAES_KEYSTREAM=0;GPUAES_GPU_MEMORY_MAX=12582912;GPUAES_STAGING_LANES=2;GPUAES_STAGING_CHUNK=1M;GPUAES_EMU_JOB_DELAY_MS=30")

# The window API of the GPU layer itself (ctr32 and ctr128 at the top of
# their range, every key size, concurrent fills): once against the real
# layer (gpu), once against the emulator.
add_executable(test_ks_api gpu/test_ks_api.c)
target_include_directories(test_ks_api PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_ks_api PRIVATE testsupport gpuaes_cuda CUDA::cudart_static OpenSSL::Crypto Threads::Threads)
add_executable(test_ks_api_emu gpu/test_ks_api.c gpu/gpu_emulator.c)
target_include_directories(test_ks_api_emu PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_ks_api_emu PRIVATE testsupport OpenSSL::Crypto Threads::Threads)
add_test(NAME ks_api COMMAND test_ks_api)
set_tests_properties(ks_api PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME ks_api_emu COMMAND test_ks_api_emu)
set_tests_properties(ks_api_emu PROPERTIES LABELS emu TIMEOUT 300)

# The GPU layer's registration itself (test_direct.c): direct jobs give what
# staged ones give, every op, in place or not, four threads in one range,
# unregister racing a job; with each injected fault, the same done prefix.
# The real layer (gpu) and the emulator.
add_executable(test_direct gpu/test_direct.c)
target_include_directories(test_direct PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_direct PRIVATE testutil gpuaes_cuda CUDA::cudart_static OpenSSL::Crypto Threads::Threads)
add_executable(test_direct_emu gpu/test_direct.c gpu/gpu_emulator.c)
target_include_directories(test_direct_emu PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_direct_emu PRIVATE testutil OpenSSL::Crypto Threads::Threads)
add_test(NAME direct_gpu COMMAND test_direct)
set_tests_properties(direct_gpu PROPERTIES LABELS "gpu;service" SKIP_RETURN_CODE 77 TIMEOUT 300)
foreach(f alloc copyin launch copyout sync)
  add_test(NAME direct_fault_${f}_gpu COMMAND test_direct --fault ${f})
  set_tests_properties(direct_fault_${f}_gpu PROPERTIES LABELS "gpu;service" SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
add_test(NAME direct_emu COMMAND test_direct_emu)
add_test(NAME direct_fault_sync_emu COMMAND test_direct_emu --fault sync)
set_tests_properties(direct_emu direct_fault_sync_emu PROPERTIES LABELS "emu;service" TIMEOUT 300)

# gpuaes as a guest in a CUDA program (cuda/runtime/cuda_guest.h): the program's own
# driver context and pending runtime error are as it left them after gpuaes's
# calls.  Real CUDA only (no _emu twin); exits 77 without a driver or GPU.
# Through EVP to the module (its own runtime), and against the GPU layer
# linked into the program (one runtime: a pending error must make it answer
# BUSY).  1M: the 8 MiB operations go to the GPU, the 16 KiB updates of a
# CTR stream to keystream ahead.
gpuaes_test_program(test_cuda_guest gpu/test_cuda_guest.c)
target_link_libraries(test_cuda_guest PRIVATE api_util CUDA::cudart_static)
gpuaes_test(NAME cuda_guest COMMAND test_cuda_guest LABELS gpu NO_EMU TIMEOUT 300
  ENV "GPUAES_OFFLOAD_MIN_BYTES=1M;GPUAES_DISPATCH=force")
add_executable(test_cuda_guest_layer gpu/test_cuda_guest.c)
target_compile_definitions(test_cuda_guest_layer PRIVATE GUEST_LAYER)
target_link_libraries(test_cuda_guest_layer PRIVATE api_util gpuaes_cuda CUDA::cudart_static OpenSSL::Crypto
  Threads::Threads)
add_test(NAME cuda_guest_layer COMMAND test_cuda_guest_layer)
set_tests_properties(cuda_guest_layer PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
