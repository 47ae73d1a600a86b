# Additions for the tests of `woolly bench` and bench/compare.sh, included from tests/CMakeLists.txt: the
# CLI test parses the JSON output with Jansson (the server's JSON library; found here too when the
# server is not built).
if(TARGET test_bench_cli)
  if(NOT TARGET PkgConfig::JANSSON)
    pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET GLOBAL jansson)
  endif()
  target_link_libraries(test_bench_cli PRIVATE PkgConfig::JANSSON)
endif()
