# Additions for the tests of `woolly bench` and bench/compare.sh, included from tests/CMakeLists.txt: the
# CLI test parses the JSON output with Jansson (already a dependency of the server).
if(TARGET test_bench_cli)
  target_link_libraries(test_bench_cli PRIVATE PkgConfig::JANSSON)
endif()
