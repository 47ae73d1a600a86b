# Additions for the tests of `woolly perplexity`, included from tests/CMakeLists.txt: the unit tests
# check the statistics, the base-file format and the progress bar directly, from the CLI's library.
foreach(t test_perplexity_stats test_perplexity_base)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE woolly_cli_quality)
  endif()
endforeach()
