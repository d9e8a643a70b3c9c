# unit/ - one module on its own, on the CPU: its sources compiled into the
# test (cuda/'s copy pool, memory cap, key schedule and GHASH math; the
# provider's dispatcher and assumption checks; the counter module;
# test/support itself), no GPU and no gpuaes module loaded.  Included from
# test/CMakeLists.txt.

# The GPU GHASH's math (cuda/kernels/ghash.cuh) compiled for the CPU and run as the
# kernels run it, against OpenSSL's GCM: no GPU needed.
add_executable(test_ghash_math unit/test_ghash_math.cpp ${PROJECT_SOURCE_DIR}/provider/gcm/gcm_math.c)
target_include_directories(test_ghash_math PRIVATE ${PROJECT_SOURCE_DIR}/cuda ${PROJECT_SOURCE_DIR}/provider
  ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_ghash_math PRIVATE -Wall -Wextra)
set_target_properties(test_ghash_math PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_link_libraries(test_ghash_math PRIVATE testsupport OpenSSL::Crypto)
gpuaes_test(NAME ghash_math COMMAND test_ghash_math)

# The GPU layer's AES key schedules (cuda/kernels/key_schedule.cpp) on the CPU: AES-NI
# and the portable one word for word, and FIPS-197's examples.  No GPU needed.
add_executable(test_key_schedule unit/test_key_schedule.cpp ${PROJECT_SOURCE_DIR}/cuda/kernels/key_schedule.cpp)
target_include_directories(test_key_schedule PRIVATE ${PROJECT_SOURCE_DIR}/cuda ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_key_schedule PRIVATE -Wall -Wextra)
set_target_properties(test_key_schedule PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_link_libraries(test_key_schedule PRIVATE testutil OpenSSL::Crypto)
gpuaes_test(NAME key_schedule COMMAND test_key_schedule)

# The staging copy pool (cuda/copy/copy_pool.cpp, and gpuaes_host_copy) on the CPU:
# concurrent copies, helping, waiting, workers stopped under load.  No GPU needed.
add_executable(test_copy_pool unit/test_copy_pool.cpp ${PROJECT_SOURCE_DIR}/cuda/copy/copy_pool.cpp
  ${PROJECT_SOURCE_DIR}/cuda/copy/copy_part.cpp ${PROJECT_SOURCE_DIR}/cuda/copy/copy_load.cpp
  ${PROJECT_SOURCE_DIR}/cuda/copy/host_copy.cpp ${PROJECT_SOURCE_DIR}/cuda/runtime/gpu_settings.cpp)
target_include_directories(test_copy_pool PRIVATE ${PROJECT_SOURCE_DIR}/cuda ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_copy_pool PRIVATE -Wall -Wextra)
set_target_properties(test_copy_pool PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_link_libraries(test_copy_pool PRIVATE testsupport)
gpuaes_test(NAME copy_pool COMMAND test_copy_pool TIMEOUT 300)

# The memory cap and out-of-memory back-off (cuda/runtime/memory_cap.cpp) on the CPU.
add_executable(test_memory_cap unit/test_memory_cap.cpp ${PROJECT_SOURCE_DIR}/cuda/runtime/memory_cap.cpp
  ${PROJECT_SOURCE_DIR}/cuda/runtime/gpu_settings.cpp)
target_include_directories(test_memory_cap PRIVATE ${PROJECT_SOURCE_DIR}/cuda ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_memory_cap PRIVATE -Wall -Wextra)
set_target_properties(test_memory_cap PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
target_link_libraries(test_memory_cap PRIVATE testsupport)
gpuaes_test(NAME memory_cap COMMAND test_memory_cap TIMEOUT 60)

# The counter module (include/gpuaes_counter.h) against a 128-bit integer
# oracle: carries, wraps, inc32, the kernels' column form.  CPU only.
add_executable(test_counter unit/test_counter.c)
target_include_directories(test_counter PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_counter PRIVATE -Wall -Wextra)
target_link_libraries(test_counter PRIVATE testsupport)
gpuaes_test(NAME counter COMMAND test_counter TIMEOUT 60)

# test/support itself (test_support.c): sizes parsed and refused, the generator's
# published outputs, a failed check failing the run.  CPU only.
add_executable(test_support unit/test_support.c)
target_compile_options(test_support PRIVATE -Wall -Wextra)
target_link_libraries(test_support PRIVATE testsupport)
gpuaes_test(NAME support COMMAND test_support TIMEOUT 60)

# The dispatcher itself (provider/gpu/dispatch.c compiled in) on a model clock:
# it looks again after contention, both ways, at a bounded cost, and keeps
# the load rules.  No GPU, no module.  Its usable cores: the affinity set.
add_executable(test_dispatch_model unit/test_dispatch_model.c ${PROJECT_SOURCE_DIR}/provider/gpu/dispatch.c
  ${PROJECT_SOURCE_DIR}/provider/debug.c)
target_include_directories(test_dispatch_model PRIVATE ${PROJECT_SOURCE_DIR}/provider
  ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(test_dispatch_model PRIVATE GPUAES_TEST_HOOKS)
target_compile_options(test_dispatch_model PRIVATE -Wall -Wextra)
target_link_libraries(test_dispatch_model PRIVATE testsupport OpenSSL::Crypto Threads::Threads)
foreach(s after8 after16 opposite slowgpu fastgpu firstuse closegpu fresh load8 cores16 fastgcm burst16 others16 othersend procs16 procs4
    cores outlier engine sizes)
  gpuaes_test(NAME dispatch_model_${s} COMMAND test_dispatch_model ${s} TIMEOUT 120)
endforeach()
gpuaes_test(NAME dispatch_model_outlier_gcm COMMAND test_dispatch_model outlier gcm TIMEOUT 120)
find_program(TASKSET taskset)
if(TASKSET)
  gpuaes_test(NAME dispatch_model_cores_taskset COMMAND ${TASKSET} -c 0 $<TARGET_FILE:test_dispatch_model>
    cores 1 TIMEOUT 60)
endif()

# What gpuaes assumes about the default provider (provider/assume/fallback_assumptions.h):
# every check against this libcrypto, through gpuaes's own loader (fallback.c)
# and dispatch calls.  CPU only: no GPU, no module.
add_executable(test_assumptions unit/test_assumptions.c ${PROJECT_SOURCE_DIR}/provider/assume/assumptions.c
  ${PROJECT_SOURCE_DIR}/provider/assume/assume_block.c ${PROJECT_SOURCE_DIR}/provider/assume/assume_gcm.c
  ${PROJECT_SOURCE_DIR}/provider/fallback.c ${PROJECT_SOURCE_DIR}/provider/debug.c
  ${PROJECT_SOURCE_DIR}/provider/gcm/gcm_math.c ${PROJECT_SOURCE_DIR}/provider/gcm/gcm_fused.c ${PROJECT_SOURCE_DIR}/provider/prov_err.c
  ${PROJECT_SOURCE_DIR}/provider/loaded_object.c)
target_include_directories(test_assumptions PRIVATE ${PROJECT_SOURCE_DIR}/provider ${PROJECT_SOURCE_DIR}/include)
target_compile_options(test_assumptions PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(test_assumptions PRIVATE OpenSSL::Crypto Threads::Threads ${CMAKE_DL_LIBS})
gpuaes_test(NAME assumptions COMMAND test_assumptions TIMEOUT 120)
