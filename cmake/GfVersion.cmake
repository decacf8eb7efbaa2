# Writes include/genfence/version.h in the build tree at BUILD time (cmake -P,
# from the gf_version target in CMakeLists.txt), so the commit a binary names
# is the one it was built from, not the one its build tree was configured at:
# a build tree configured once and rebuilt after `git pull` used to report the
# old commit in every run.json, JUnit and golden it wrote. "-dirty" marks a
# build from a tree with uncommitted changes to tracked files. The file is
# replaced only when its text changes, so an unchanged commit recompiles
# nothing.
# In: SRC (source dir), OUT (version.h path), IN (version.h.in), PROJECT_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE GENFENCE_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT GENFENCE_COMMIT)
  set(GENFENCE_COMMIT "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD --
                  WORKING_DIRECTORY ${SRC} RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty EQUAL 1)
    string(APPEND GENFENCE_COMMIT "-dirty")
  endif()
endif()
configure_file(${IN} ${OUT}.tmp @ONLY)
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
