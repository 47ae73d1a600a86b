# The model-level plain test, run by ctest as `cmake -P`: `woolly logits` on MODEL's reference token
# sequence with each batch size of BATCHES (comma-separated; default 512 (the GEMM kernels), 1 (GEMV,
# decode) and 7 (partial batches)), at kernel
# level ISA and activation format ACT (WOOLLY_ISA, WOOLLY_ACT; empty: the defaults) with a KV cache of
# type KV (`--kv-type`; empty: the default), then logits_nmse against the float64 reference (at the
# Q8_0-cache bar for KV q8_0). Each program runs under EMULATOR (the cross build's qemu command line,
# space-separated; empty natively).
#
#   cmake -DEMULATOR=... -DWOOLLY=... -DLOGITS_NMSE=... -DTESTDATA=... -DMODEL=... [-DISA=...] [-DACT=...]
#         [-DKV=f16|f32|q8_0] [-DBATCHES=512,1,7] -DOUT=PREFIX -P model_logits.cmake
foreach(var WOOLLY LOGITS_NMSE TESTDATA MODEL OUT)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "model_logits.cmake: -D${var}= is required")
  endif()
endforeach()
separate_arguments(emulator UNIX_COMMAND "${EMULATOR}")

set(tokens_file ${TESTDATA}/refs/${MODEL}.tokens.txt)
if(NOT EXISTS ${tokens_file})
  message(FATAL_ERROR "${tokens_file} is missing (the shared test data must be beside the repository)")
endif()
file(READ ${tokens_file} tokens)
string(STRIP "${tokens}" tokens)

set(env)
if(ISA)
  list(APPEND env WOOLLY_ISA=${ISA})
endif()
if(ACT)
  list(APPEND env WOOLLY_ACT=${ACT})
endif()
set(kv_args)
set(nmse_args)
if(KV)
  set(kv_args --kv-type ${KV})
  set(nmse_args kv=${KV})
endif()
set(outputs)
if(NOT BATCHES)
  set(BATCHES 512,1,7)
endif()
string(REPLACE "," ";" batches "${BATCHES}")
foreach(batch ${batches})
  set(out ${OUT}-b${batch}.f32)
  file(REMOVE ${out})
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${env} ${emulator} ${WOOLLY} logits -m ${TESTDATA}/models/${MODEL}.gguf
            --tokens ${tokens} -o ${out} -b ${batch} -t 2 ${kv_args}
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "woolly logits (${MODEL}, batch ${batch}, ${env}) failed: ${rc}")
  endif()
  list(APPEND outputs ${out})
endforeach()

set(kv_note "")
if(KV)
  set(kv_note ", KV cache ${KV}")
endif()
message(STATUS "${MODEL}, environment: ${env}${kv_note}")
execute_process(COMMAND ${emulator} ${LOGITS_NMSE} ${MODEL} ${nmse_args} ${outputs} RESULT_VARIABLE rc)
file(REMOVE ${outputs})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the logits of ${MODEL} miss the bar")
endif()
