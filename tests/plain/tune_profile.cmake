# The tuner on this machine, run by ctest as `cmake -P` (in the aarch64 cross build under qemu, where
# Criterion's tests of the tuner cannot run): `woolly tune --preset tiny` with a short budget writes a
# profile, and a run on the test model of the same shapes loads it: `woolly bench` names the profile, with
# tuned steps in use, not "defaults", and no warning. Speeds under an emulator mean nothing; a valid
# profile that loads does. Each program runs under EMULATOR (space-separated; empty natively).
#
#   cmake -DEMULATOR=... -DWOOLLY=... -DTESTDATA=... -DOUT=FILE [-DBUDGET=3] -P tune_profile.cmake
foreach(var WOOLLY TESTDATA OUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "tune_profile.cmake: -D${var}= is required")
  endif()
endforeach()
separate_arguments(emulator UNIX_COMMAND "${EMULATOR}")
if(NOT BUDGET)
  set(BUDGET 3)
endif()
set(model ${TESTDATA}/models/tiny-llama-q4_k_m.gguf)
if(NOT EXISTS ${model})
  message(FATAL_ERROR "${model} is missing (the shared test data must be beside the repository)")
endif()

file(REMOVE ${OUT})
execute_process(COMMAND ${emulator} ${WOOLLY} tune --preset tiny --budget ${BUDGET} -t 2 -o ${OUT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "woolly tune:\n${out}${err}")
if(NOT rc EQUAL 0 OR NOT EXISTS ${OUT})
  message(FATAL_ERROR "woolly tune --preset tiny failed (${rc}) or wrote no profile at ${OUT}")
endif()
if(NOT out MATCHES "\\| decode \\| F16 \\| 64 \\|" OR NOT out MATCHES "\\| prefill \\| F16 \\| 64 \\|")
  message(FATAL_ERROR "woolly tune printed no attention rows")
endif()

execute_process(COMMAND ${emulator} ${WOOLLY} bench -m ${model} -p 8 -n 2 -r 1 -t 2 --tune-profile ${OUT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "woolly bench with the profile:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "woolly bench with the profile failed (${rc})")
endif()
string(FIND "${out}" "tuning profile: ${OUT} (" at)
if(at LESS 0 OR out MATCHES "\\(0 tuned" OR out MATCHES "tuning profile: defaults")
  message(FATAL_ERROR "the run did not load the profile ${OUT} with tuned steps in use")
endif()
if(err MATCHES "warning")
  message(FATAL_ERROR "the run warned about the profile")
endif()
file(REMOVE ${OUT})
