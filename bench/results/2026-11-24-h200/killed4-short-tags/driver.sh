#!/bin/bash
# the forged-GCM question: diff_service_killed4_emu many times, with and without be74e84
set -u
rm -rf /tmp/B && mkdir /tmp/B && cp -r . /tmp/B/ && (cd /tmp/B && patch -p1 -s < be74.patch && echo patched)
for t in $PWD /tmp/B; do
  (cd $t && cmake -S . -B build-emu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null 2>&1 && cmake --build build-emu -j16 --target gpuaes_emu gpuaesd_emu test_diff > /dev/null 2>&1; echo "built $t rc=$?")
done
for t in $PWD /tmp/B; do
  cd $t/build-emu
  seq 200 | xargs -P 12 -I{} sh -c 'ctest -R "^diff_service_killed4_emu$" --output-on-failure > /tmp/r-$$-{}.log 2>&1 || { echo FAIL {}; grep -E "flipped|case:" /tmp/r-$$-{}.log | head -2; }' > $OUT/k4-$(basename $t).txt 2>&1
  echo "$t: $(grep -c '^FAIL' $OUT/k4-$(basename $t).txt) failures in 200"; head -6 $OUT/k4-$(basename $t).txt
done
