# Additions for the server's end-to-end tests (tests/test_server_*.c), included from tests/CMakeLists.txt:
# they start `woolly serve` and talk to it over HTTP through libcurl, with the helpers of
# server_harness.c.
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
add_library(woolly_servertest STATIC ${CMAKE_CURRENT_SOURCE_DIR}/server_harness.c)
woolly_strict(woolly_servertest)
target_link_libraries(woolly_servertest PUBLIC woolly_testutil PkgConfig::CURL)
foreach(src ${WOOLLY_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  if(name MATCHES "^test_server_")
    target_link_libraries(${name} PRIVATE woolly_servertest)
  endif()
endforeach()
