# gpuaesd, the per-user GPU service (docs/SERVICE.md), end to end: the
# service with the emulated GPU layer (gpuaesd_emu) and its client library,
# against OpenSSL's default provider.  Labelled emu: CI runs them, and the
# ASan+UBSan pass of scripts/test.sh too.
add_executable(gpuaesd_emu ${GPUAESD_SOURCES} gpu_emulator.c)
target_include_directories(gpuaesd_emu PRIVATE ${PROJECT_SOURCE_DIR}/service ${PROJECT_SOURCE_DIR}/include)
target_compile_options(gpuaesd_emu PRIVATE -Wall -Wextra)
target_link_libraries(gpuaesd_emu PRIVATE gpuaesd_client OpenSSL::Crypto Threads::Threads)
set_target_properties(gpuaesd_emu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/emu)

add_executable(test_service test_service.c test_service_hostile.c service_util.c
  ${PROJECT_SOURCE_DIR}/provider/gcm_math.c)
target_include_directories(test_service PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/provider
  ${PROJECT_SOURCE_DIR}/service)
target_compile_options(test_service PRIVATE -Wall -Wextra)
target_link_libraries(test_service PRIVATE gpuaesd_client testutil OpenSSL::Crypto Threads::Threads)
add_dependencies(test_service gpuaesd_emu)

# diff: random jobs of every op through a detached service, bit for bit;
# fuzz: hostile clients beside a good one; uid: another uid is refused (root
# only, else skipped); dir: a socket directory of the wrong mode, owner or a
# symbolic link is refused; kill: SIGKILL / SIGSTOP of the service while a
# client waits, then a new service.
foreach(t diff fuzz uid dir kill)
  add_test(NAME service_${t} COMMAND test_service ${t} $<TARGET_FILE:gpuaesd_emu>)
  set_tests_properties(service_${t} PROPERTIES LABELS "emu;service" SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# The real service on a GPU machine (skipped without a usable GPU).
add_test(NAME service_diff_gpu COMMAND test_service diff $<TARGET_FILE:gpuaesd> --gpu)
set_tests_properties(service_diff_gpu PROPERTIES LABELS "gpu;service" SKIP_RETURN_CODE 77 TIMEOUT 300)
