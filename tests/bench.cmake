# Additions for the tests of `woolly bench` and bench/compare.sh, included from tests/CMakeLists.txt: the
# CLI test parses the JSON output with Jansson (the server's JSON library; found here too when the
# server is not built).
if(TARGET test_bench_cli)
  if(NOT TARGET PkgConfig::JANSSON)
    pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET GLOBAL jansson)
  endif()
  target_link_libraries(test_bench_cli PRIVATE PkgConfig::JANSSON)
endif()

# The documents: the README's quick start, length and links (tests/docs_check.cmake), and bench/RESULTS.md's
# tables and the README's summary as bench/results_tables.py makes them from bench/results/*.jsonl. They
# run on the build machine (a cross build has them from its native build).
if(NOT CMAKE_CROSSCOMPILING)
  add_test(NAME docs_check
           COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/docs_check.cmake)
  # results_tables.py needs only Python 3's standard library: Debian's, else the first on PATH.
  find_program(WOOLLY_RESULTS_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT WOOLLY_RESULTS_PYTHON)
    find_program(WOOLLY_RESULTS_PYTHON NAMES python3)
  endif()
  if(WOOLLY_RESULTS_PYTHON)
    add_test(NAME results_tables
             COMMAND ${WOOLLY_RESULTS_PYTHON} ${PROJECT_SOURCE_DIR}/bench/results_tables.py render --check)
    # and the script fed what `woolly bench` and bench/compare.sh print today
    if(TARGET woolly-cli)
      add_test(NAME results_tables_add
               COMMAND ${CMAKE_COMMAND} -DPYTHON=${WOOLLY_RESULTS_PYTHON} -DWOOLLY=$<TARGET_FILE:woolly-cli>
                       -DROOT=${PROJECT_SOURCE_DIR} -DMODEL=${WOOLLY_TESTDATA}/models/tiny-llama-q4_k_m.gguf
                       -DWORK=${CMAKE_CURRENT_BINARY_DIR}/results_tables_add
                       -P ${CMAKE_CURRENT_SOURCE_DIR}/results_tables_add.cmake)
    endif()
  endif()
endif()
