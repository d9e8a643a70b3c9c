# Keystream ahead (CTR): differential tests against the default provider with
# small knobs, so that windows turn over constantly (docs/DESIGN.md,
# "Keystream ahead").  Labelled gpu: the _emu twin runs them against the
# emulated GPU layer, whose windows become ready only on the second poll.
gpuaes_test_program(test_keystream test_keystream.c)
set(_ks_env "GPUAES_KEYSTREAM_RAMP_BYTES=4K;GPUAES_KEYSTREAM_MAX_WINDOW=64K;GPUAES_KEYSTREAM_TOTAL_BYTES=1M")
gpuaes_test(NAME keystream COMMAND test_keystream --gpu --threads 8 LABELS gpu TIMEOUT 600
  ENV "${_ks_env}")
# Windows of one block and an odd size: every update crosses windows.
gpuaes_test(NAME keystream_tiny COMMAND test_keystream --gpu --threads 4 LABELS gpu TIMEOUT 600
  ENV "GPUAES_KEYSTREAM_RAMP_BYTES=0;GPUAES_KEYSTREAM_MAX_WINDOW=4112;GPUAES_KEYSTREAM_TOTAL_BYTES=64K")
# A GPU failure in the keystream path: output stays right (CPU), error counted.
gpuaes_test(NAME keystream_fault COMMAND test_keystream --threads 2 LABELS gpu TIMEOUT 600
  ENV "${_ks_env};GPUAES_FAULT=sync")
# Off, and no GPU: the same streams on the CPU path.
gpuaes_test(NAME keystream_off COMMAND test_keystream --threads 2 TIMEOUT 600
  ENV "${_ks_env};GPUAES_KEYSTREAM=0")
