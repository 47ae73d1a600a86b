# Additions for the runtime's tests, included from tests/CMakeLists.txt.

# test_alloc counts allocator calls made by libwoolly (linked in statically) while decoding: the
# allocator is wrapped at link time, which works the same with and without the sanitizers.
if(TARGET test_alloc)
  target_link_options(test_alloc PRIVATE
    "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=aligned_alloc,--wrap=posix_memalign")
endif()

# The C API example of docs/API.md: built against the public header only, run on stories260K.
add_executable(example_api ${CMAKE_CURRENT_SOURCE_DIR}/example_api.c)
woolly_strict(example_api)
target_link_libraries(example_api PRIVATE woolly)
add_test(NAME example_api COMMAND example_api ${WOOLLY_TESTDATA}/models/stories260K.gguf)
# The greedy continuation of stories260K (as in ../shared/testdata/refs/stories260K.greedy200.txt).
set_tests_properties(example_api PROPERTIES
  PASS_REGULAR_EXPRESSION "^ ?Once upon a time, there was a little girl named Lily\\. She loved to play outside")

# The multi-sequence batch example of woolly.h: two prompts decoded together; the first continues as it
# does alone (the greedy text above).
add_executable(example_batch ${CMAKE_CURRENT_SOURCE_DIR}/example_batch.c)
woolly_strict(example_batch)
target_link_libraries(example_batch PRIVATE woolly)
add_test(NAME example_batch COMMAND example_batch ${WOOLLY_TESTDATA}/models/stories260K.gguf)
set_tests_properties(example_batch PROPERTIES
  PASS_REGULAR_EXPRESSION "^ ?Once upon a time, there was a little girl named Lily\\. She loved to play outside")
