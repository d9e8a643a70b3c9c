# py/ - the tests written in Python: docs/CONFIG.md against the code, and
# gpuaes inside the `cryptography` wheels.  Included from test/CMakeLists.txt.

# gpuaes inside programs with their own libcrypto, the `cryptography` wheels'
# (static OpenSSL): a differential of every cipher through their API with
# every update on the emulated GPU, against the same wheel without gpuaes,
# and errors of gpuaes and its fallback on the wheel's stack.  wheel_emu: the
# cryptography python3 has (skipped where none); wheel_<OpenSSL>_emu: CI's
# OpenSSL matrix, one pinned wheel each (test/py/wheels.txt, installed by
# scripts/deps.sh; with CI set, a missing one fails).  Not in sanitized
# builds: an instrumented module cannot load into an uninstrumented python
# (test_errors covers the same code there, as a foreign core of its own).
find_program(GPUAES_PYTHON3 python3)
if(GPUAES_PYTHON3 AND NOT GPUAES_SANITIZE)
  set(_wheel ${GPUAES_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/py/test_wheel.py)
  gpuaes_test(NAME wheel_emu LABELS emu matrix TIMEOUT 300 MODULE_DIR ${CMAKE_BINARY_DIR}/emu
    COMMAND ${_wheel})
  file(READ ${CMAKE_CURRENT_SOURCE_DIR}/py/wheels.txt _pins)
  string(REGEX MATCHALL "# OpenSSL [0-9.]+\ncryptography==[0-9.]+" _pins "${_pins}")
  foreach(_pin IN LISTS _pins)
    string(REGEX MATCH "OpenSSL ([0-9.]+)\ncryptography==([0-9.]+)" _pin "${_pin}")
    gpuaes_test(NAME wheel_${CMAKE_MATCH_1}_emu LABELS emu matrix TIMEOUT 600
      MODULE_DIR ${CMAKE_BINARY_DIR}/emu COMMAND ${_wheel} --wheel ${CMAKE_MATCH_2})
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/py/wheels.txt)
endif()

# docs/CONFIG.md against the code: every knob of provider/settings.c's table
# (both names, range, default) and every GPUAES_* / GPUAESD_* variable the
# code reads, and nothing else (test/py/test_config_doc.py).  CPU only.
if(GPUAES_PYTHON3)
  gpuaes_test(NAME config_doc TIMEOUT 60
    COMMAND ${GPUAES_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/py/test_config_doc.py ${PROJECT_SOURCE_DIR})
else()
  message(WARNING "no python3: the test config_doc (docs/CONFIG.md against the code) is not registered")
endif()
