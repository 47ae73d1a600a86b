# The default profiles shipped per CPU class (tune/defaults/<class>.profile; kernels/class_profile.h), built
# into libwoolly as data: a C source in the build folder holds the bytes of each file whose match line
# names this build's architecture, in the order of their names. Adding, removing or editing a profile
# runs the configure step again.
function(woolly_embed_shipped_profiles target)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    set(arch x86_64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64|ARM64")
    set(arch aarch64)
  else()
    set(arch other)
  endif()
  file(GLOB files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tune/defaults/*.profile)
  list(SORT files)
  set(arrays "")
  set(entries "")
  set(n 0)
  foreach(f ${files})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
    file(STRINGS ${f} match REGEX "^match " LIMIT_COUNT 1)
    string(REGEX REPLACE "^match ([^ ]+).*" "\\1" file_arch "${match}")
    if(NOT file_arch STREQUAL arch)
      continue()
    endif()
    get_filename_component(name ${f} NAME)
    file(READ ${f} hex HEX)
    string(LENGTH "${hex}" hex_len)
    math(EXPR len "${hex_len} / 2")
    string(REPEAT "[0-9a-f]" 32 sixteen_bytes)
    string(REGEX REPLACE "(${sixteen_bytes})" "\\1\n" hex "${hex}")
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
    # A NUL after the text (not counted) keeps an empty file's array valid C.
    string(APPEND arrays "/* ${name} */\nstatic const char PROFILE_${n}[] = {\n${bytes}0};\n\n")
    string(APPEND entries "    {\"${name}\", PROFILE_${n}, ${len}},\n")
    math(EXPR n "${n} + 1")
  endforeach()
  if(n EQUAL 0)
    set(entries "    {0},\n")
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/shipped_profiles.c)
  file(CONFIGURE OUTPUT ${out} @ONLY CONTENT
"/* Written by runtime/kernels/shipped_profiles.cmake from tune/defaults/<class>.profile (the ${arch} ones). */
#include \"class_profile.h\"

@arrays@const woolly_shipped_profile woolly_shipped_profiles[] = {
@entries@};
const int woolly_n_shipped_profiles = ${n};
")
  target_sources(${target} PRIVATE ${out})
endfunction()
