# The codegen step. codegen/gen.py renders templates/ from codegen/kernels.toml into generated/, which
# is committed: a machine without Python + Jinja2 still builds from it (with a warning).
#
# gen.py runs at configure time (so the per-ISA file list in generated/kernels.cmake is current when
# the spec changes: the spec is a configure dependency) and again as a build step whenever a template
# or the generator changes.

set(WOOLLY_CODEGEN_DIR ${PROJECT_SOURCE_DIR}/codegen)
set(WOOLLY_GENERATED_DIR ${PROJECT_SOURCE_DIR}/generated)

# The first python3 on PATH may be a different interpreter from Debian's: take the first candidate
# that can import jinja2.
set(_woolly_py_candidates)
if(WOOLLY_PYTHON)
  list(APPEND _woolly_py_candidates ${WOOLLY_PYTHON})
endif()
find_program(_woolly_path_python3 NAMES python3 NO_CACHE)
list(APPEND _woolly_py_candidates /usr/bin/python3 ${_woolly_path_python3})
set(WOOLLY_CODEGEN_PYTHON "")
foreach(py ${_woolly_py_candidates})
  if(EXISTS ${py})
    execute_process(COMMAND ${py} -c "import jinja2" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(WOOLLY_CODEGEN_PYTHON ${py})
      break()
    endif()
  endif()
endforeach()

set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${WOOLLY_CODEGEN_DIR}/kernels.toml)

if(WOOLLY_CODEGEN_PYTHON)
  message(STATUS "codegen: ${WOOLLY_CODEGEN_PYTHON}")
  execute_process(COMMAND ${WOOLLY_CODEGEN_PYTHON} ${WOOLLY_CODEGEN_DIR}/gen.py --out ${WOOLLY_GENERATED_DIR}
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "codegen failed")
  endif()
else()
  message(WARNING "No Python 3 with Jinja2 found (install python3-jinja2): building from the committed "
                  "generated/ sources; templates cannot be regenerated on this machine.")
endif()

# Sets the compile groups of the generated kernels (WOOLLY_KERNEL_GROUPS, built by runtime/kernels/), the
# levels and their tests (WOOLLY_KERNEL_LEVELS, WOOLLY_TEST_SOURCES_<LEVEL>) and the lists of all of them.
include(${WOOLLY_GENERATED_DIR}/kernels.cmake)

if(WOOLLY_CODEGEN_PYTHON)
  file(GLOB_RECURSE _woolly_templates CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/templates/*)
  file(GLOB _woolly_codegen_py CONFIGURE_DEPENDS ${WOOLLY_CODEGEN_DIR}/*.py)
  add_custom_command(
    OUTPUT ${PROJECT_BINARY_DIR}/codegen.stamp
    COMMAND ${WOOLLY_CODEGEN_PYTHON} ${WOOLLY_CODEGEN_DIR}/gen.py --out ${WOOLLY_GENERATED_DIR}
    COMMAND ${CMAKE_COMMAND} -E touch ${PROJECT_BINARY_DIR}/codegen.stamp
    DEPENDS ${_woolly_templates} ${_woolly_codegen_py} ${WOOLLY_CODEGEN_DIR}/kernels.toml
    BYPRODUCTS ${WOOLLY_GENERATED_SOURCES} ${WOOLLY_GENERATED_TEST_SOURCES}
    COMMENT "codegen: rendering templates into generated/"
    VERBATIM)
  add_custom_target(codegen DEPENDS ${PROJECT_BINARY_DIR}/codegen.stamp)
endif()
