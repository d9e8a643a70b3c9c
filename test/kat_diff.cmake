# Known-answer tests (test_kat: test/vectors, see its README.md) and the
# differential test against OpenSSL's default provider (test_diff).
gpuaes_test_program(test_kat test_kat.c kat_vectors.c kat_diff_op.c)
gpuaes_test_program(test_diff test_diff.c test_diff_stream.c test_diff_wrap.c test_diff_big.c
  test_diff_migrate.c kat_diff_op.c)

# CPU path with default settings; run everywhere.
gpuaes_test(NAME kat COMMAND test_kat)
gpuaes_test(NAME diff COMMAND test_diff)
# The threshold makes updates alternate between CPU and GPU on a GPU host.
gpuaes_test(NAME diff_switch COMMAND test_diff ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_threads COMMAND test_diff --threads 8)

# GPU path: skipped (77) without a GPU; --gpu asserts that gpu-bytes grew.
gpuaes_test(NAME kat_gpu COMMAND test_kat --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_gpu COMMAND test_diff --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_gpu_switch COMMAND test_diff --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force)
gpuaes_test(NAME diff_gpu_threads COMMAND test_diff --gpu --threads 16
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
# The same, small enough for ThreadSanitizer in CI time (scripts/tsan.sh).
gpuaes_test(NAME diff_gpu_threads_small_emu COMMAND test_diff --gpu --threads 8 --iterations 8 --max-bytes 1M
  LABELS emu MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force)
# GCM messages that begin on the CPU (first update 64 KiB .. 256 KiB - 1) and
# move to the GPU at the first block-aligned update of 256 KiB or more.
gpuaes_test(NAME diff_gpu_migrate COMMAND test_diff --gpu --migrate --iterations 8
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=262144 GPUAES_DISPATCH=force)
# GCM messages on gpuaes's engine whose CPU blocks take the stitched pass
# (gcm_fused.c): updates of 4 KiB and more to the GPU, the rest, from 16 bytes
# (GPUAES_TEST_FUSED_MIN: the emulated module only), through the default
# provider's AES-GCM at a counter of the engine's choosing; the callers' shares
# of GPU jobs too.
gpuaes_test(NAME diff_gpu_fused_emu COMMAND test_diff --gpu --fused --iterations 60 --max-bytes 1M
  LABELS emu MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force GPUAES_TEST_FUSED_MIN=16)
gpuaes_test(NAME diff_gpu_fused_share_emu COMMAND test_diff --gpu --fused --iterations 30 --max-bytes 2M
  LABELS emu MODULE_DIR ${CMAKE_BINARY_DIR}/emu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_GPU_CPU_SHARE=all
  GPUAES_TEST_FUSED_MIN=16)
gpuaes_test(NAME diff_gpu_big COMMAND test_diff --gpu --big
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force TIMEOUT 900)

# Lengths around the staging-chunk boundaries (+-1 byte, +-1 block), every GPU
# operation, in place and not (the _emu twin covers the emulator's 1 MiB chunks).
# 1 MiB buffers and 3 lanes: a job's chunks ramp from 128 KiB to 1 MiB and
# down, and lanes wrap at an odd count.
gpuaes_test_program(test_chunk_edges test_chunk_edges.c kat_diff_op.c)
gpuaes_test(NAME chunk_edges_gpu COMMAND test_chunk_edges --gpu
  LABELS gpu ENV GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_STAGING_CHUNK=1048576 GPUAES_STAGING_LANES=3 TIMEOUT 600)
