# Additions for the server's end-to-end tests (tests/test_server_*.c and tests/server/test_*.c), included
# from tests/CMakeLists.txt: they start `woolly serve` and talk to it over HTTP through libcurl (or raw
# sockets, tests/server/raw_http.c), with the helpers of server_harness.c.
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
add_library(woolly_servertest STATIC ${CMAKE_CURRENT_SOURCE_DIR}/server_harness.c
  ${CMAKE_CURRENT_SOURCE_DIR}/server/raw_http.c)
woolly_strict(woolly_servertest)
target_include_directories(woolly_servertest PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/server)
target_link_libraries(woolly_servertest PUBLIC woolly_testutil PkgConfig::CURL)
foreach(src ${WOOLLY_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  if(name MATCHES "^test_server_")
    target_link_libraries(${name} PRIVATE woolly_servertest)
  endif()
endforeach()

# The hardening and replica tests (tests/server/test_*.c): drain, limits, the connection guard, health
# states, affinity and metrics.
file(GLOB WOOLLY_SERVER_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/server/test_*.c)
foreach(src ${WOOLLY_SERVER_TEST_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  woolly_strict(${name})
  target_link_libraries(${name} PRIVATE woolly_servertest)
  add_dependencies(${name} woolly-cli)
  add_test(NAME ${name} COMMAND ${name} --jobs 2)
endforeach()


# The deployment files (deploy/): HAProxy's own check of its configuration, systemd's of the unit, and
# the Kubernetes manifest against the API's schemas (npm packages kubernetes-models and yaml, pinned in
# tests/server/package-lock.json).
add_test(NAME deploy_check COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/server/deploy_check.sh
  ${PROJECT_SOURCE_DIR} $<TARGET_FILE:woolly-cli>)
