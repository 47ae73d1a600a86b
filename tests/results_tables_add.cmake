# bench/results_tables.py fed what the bench tools print today (a ctest, run as `cmake -DPYTHON=...
# -DWOOLLY=<woolly> -DROOT=<source dir> -DMODEL=<gguf> -DWORK=<scratch dir> -P
# tests/results_tables_add.cmake`): `woolly bench --format json --roofline` and bench/compare.sh's table
# (with tests/fake_llama_bench.sh, a stand-in for llama-bench with fixed figures: pp 1000 t/s and tg 100
# t/s per thread), both on 2 threads, go into records of their own through `add`, and `render` must make
# of them a table with both engines' figures, the ratio, the limits and the commands, and a README
# summary row; `render --check` must then pass. So a change to either tool's output that the script no
# longer reads fails here, not at the next measurement.
cmake_minimum_required(VERSION 3.20)

foreach(v PYTHON WOOLLY ROOT MODEL WORK)
  if(NOT ${v})
    message(FATAL_ERROR "results_tables_add: give -D${v}=...")
  endif()
endforeach()

set(script ${ROOT}/bench/results_tables.py)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/records)

function(run what)
  execute_process(${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "results_tables_add: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# Woolly alone, with the machine's limits.
set(bench_cmd ${WOOLLY} bench -m ${MODEL} -p 16 -n 4 -r 2 -t 2 --roofline --format json --tune-profile none)
run("woolly bench" COMMAND ${bench_cmd} OUTPUT_FILE ${WORK}/bench.json)
run("add (woolly bench)" COMMAND ${PYTHON} ${script} --records ${WORK}/records add --class zen3
    --commit 0123456 --date 2026-01-02 --cpu "a test CPU" --model tiny --command "woolly bench (the test's)"
    INPUT_FILE ${WORK}/bench.json)

# Both engines, from compare.sh.
run("compare.sh" COMMAND ${CMAKE_COMMAND} -E env WOOLLY=${WOOLLY}
    bash ${ROOT}/bench/compare.sh ${ROOT}/tests/fake_llama_bench.sh ${MODEL} -p 16 -n 4 -t 2 -r 1
    --woolly-args "--tune-profile none" OUTPUT_FILE ${WORK}/compare.txt)
run("add (compare.sh)" COMMAND ${PYTHON} ${script} --records ${WORK}/records add --class zen3
    --commit 0123456 --date 2026-01-02 --model tiny --other llama.cpp --command "compare.sh (the test's)"
    INPUT_FILE ${WORK}/compare.txt)

file(WRITE ${WORK}/RESULTS.md
     "# results\n\n<!-- results_tables.py render: begin -->\n<!-- results_tables.py render: end -->\n")
file(WRITE ${WORK}/README.md
     "# readme\n\n<!-- results_tables.py summary: begin -->\n<!-- results_tables.py summary: end -->\n")
set(render ${PYTHON} ${script} --records ${WORK}/records render --results ${WORK}/RESULTS.md
    --readme ${WORK}/README.md)
run("render" COMMAND ${render})
run("render --check" COMMAND ${render} --check)

file(READ ${WORK}/RESULTS.md results)
file(READ ${WORK}/README.md readme)
set(failures "")
# pattern (a regular expression), what it shows
set(expect
    "\\| tiny \\| pp16 \\| 2 \\| [0-9.]+ \\| - \\| llama\\.cpp \\| 2000\\.00 \\| [0-9.]+ \\| `0123456` \\| 2026-01-02 \\|"
    "compare.sh's pp16 beside the stand-in's 2000 t/s, with the ratio, the commit and the date"
    "\\| tiny \\| tg4 \\| 2 \\| [0-9.]+ \\| - \\| llama\\.cpp \\| 200\\.00 \\| [0-9.]+ \\|"
    "compare.sh's tg4 beside the stand-in's 200 t/s"
    "\\| tiny \\| pp16 \\| 2 \\| [0-9.]+ ± [0-9.]+( \\([0-9.]+-[0-9.]+\\))? \\| [0-9.]+% of [0-9.]+ GMAC/s \\| alone \\|"
    "woolly bench's pp16 alone, with its share of the int8 limit"
    "\\| tiny \\| tg4 \\| 2 \\| [^|]+ \\| [0-9.]+% of [0-9.]+ GB/s \\| alone \\|"
    "woolly bench's tg4 alone, with its share of the DRAM limit"
    "\\| 2 \\| [0-9.]+ \\(lowest of 3: [0-9.]+\\) \\| [^|]+ \\| [^|]+ \\| [^|]+ \\| [^|]+ \\| [^|]+ \\| [^|]+ \\| `0123456` \\| 2026-01-02 \\|"
    "the limits that run measured (DRAM as the best and the lowest of its 3 samples, int8, BF16 and F32 with their instructions)"
    "`woolly bench \\(the test's\\)`, Woolly at `0123456`, 2026-01-02\\."
    "the command of the woolly bench run"
    "`compare.sh \\(the test's\\)`, Woolly at `0123456`, 2026-01-02[;] llama.cpp at `stand-in`\\."
    "the command of the compare.sh run, with the other engine's build"
    "CPU: a test CPU\\."
    "the machine's CPU line")
list(LENGTH expect n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET expect ${i} pattern)
  list(GET expect ${j} what)
  if(NOT results MATCHES "${pattern}")
    string(APPEND failures "  RESULTS.md lacks ${what}\n")
  endif()
endforeach()
if(NOT readme MATCHES "\\| a test CPU, AVX2 only \\| tiny \\| [0-9.]+ \\(pp16\\) / [0-9.]+ \\(tg4\\) \\| - / - \\| [0-9.]+x \\(pp16\\) / [0-9.]+x \\(tg4\\) \\|")
  string(APPEND failures "  README.md lacks the summary row of the test machine\n")
endif()
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "results_tables_add:\n${failures}\nRESULTS.md:\n${results}\nREADME.md:\n${readme}")
endif()
message(STATUS "results_tables_add: both tools' output read, rendered and checked")
