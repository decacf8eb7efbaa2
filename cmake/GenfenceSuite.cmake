# GenfenceSuite.cmake: every (case, backend) of a genfence suite as its own
# CTest test, so `ctest -j`, `ctest -L`, CDash submission (ctest -D / -M) and
# any CI matrix run and report it with the tools they already have.
#
#   include(GenfenceSuite)          # or find_package(genfence CONFIG)
#   genfence_add_suite(NAME nightly
#                      CASES cases/golden.yaml cases/generation.yaml
#                      BACKENDS ref openblas
#                      [FILTER REGEX] [TAGS TAG...] [KINDS KIND...]
#                      [ARGS --timeout 300 ...]     # more `genfence run` options
#                      [LABELS more labels...]
#                      [GENFENCE /path/to/genfence] # default: GENFENCE_EXECUTABLE or find_program
#                      [WORKING_DIRECTORY DIR]      # default: CMAKE_CURRENT_SOURCE_DIR
#                      [REPORT_DIR DIR]             # default: CMAKE_CURRENT_BINARY_DIR/genfence-reports/NAME
#                      [TIMEOUT SECONDS])           # CTest TIMEOUT per test (default 1200)
#
# At configure time it runs `genfence list --json` on CASES (with FILTER,
# TAGS, KINDS) and adds, for each case and each BACKENDS entry the case's own
# `backends:` filter allows, the test NAME/<case id>@<backend>:
#   genfence run CASES --filter '^<id>$' --backend <backend> --report-dir REPORT_DIR/<id>@<backend> ARGS
# labelled genfence, NAME, backend:<backend>, kind:<kind>, tag:<tag>... and
# LABELS. A skip (backend unavailable on this machine) is a CTest skip. The
# case files are configure dependencies: editing one reconfigures.
# Needs CMake 3.19 (string(JSON)).
cmake_minimum_required(VERSION 3.19)

if(NOT GENFENCE_EXECUTABLE)
  find_program(GENFENCE_EXECUTABLE genfence HINTS "${CMAKE_CURRENT_LIST_DIR}/../../../bin")
endif()

function(genfence_add_suite)
  cmake_parse_arguments(PARSE_ARGV 0 GS "" "NAME;FILTER;GENFENCE;WORKING_DIRECTORY;REPORT_DIR;TIMEOUT"
                        "CASES;BACKENDS;TAGS;KINDS;ARGS;LABELS")
  if(NOT GS_NAME)
    message(FATAL_ERROR "genfence_add_suite: NAME is required")
  endif()
  if(NOT GS_BACKENDS)
    message(FATAL_ERROR "genfence_add_suite(${GS_NAME}): BACKENDS is required (e.g. BACKENDS ref)")
  endif()
  set(exe "${GS_GENFENCE}")
  if(NOT exe)
    set(exe "${GENFENCE_EXECUTABLE}")
  endif()
  if(NOT exe)
    message(FATAL_ERROR "genfence_add_suite(${GS_NAME}): no genfence found: pass GENFENCE or set GENFENCE_EXECUTABLE")
  endif()
  if(NOT GS_WORKING_DIRECTORY)
    set(GS_WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()
  if(NOT GS_REPORT_DIR)
    set(GS_REPORT_DIR "${CMAKE_CURRENT_BINARY_DIR}/genfence-reports/${GS_NAME}")
  endif()
  if(NOT GS_TIMEOUT)
    set(GS_TIMEOUT 1200)
  endif()
  set(sel)
  if(GS_FILTER)
    list(APPEND sel --filter "${GS_FILTER}")
  endif()
  foreach(t IN LISTS GS_TAGS)
    list(APPEND sel --tag "${t}")
  endforeach()
  foreach(k IN LISTS GS_KINDS)
    list(APPEND sel --kind "${k}")
  endforeach()
  foreach(f IN LISTS GS_CASES)
    get_filename_component(abs "${f}" ABSOLUTE BASE_DIR "${GS_WORKING_DIRECTORY}")
    if(NOT IS_DIRECTORY "${abs}")
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${abs}")
    endif()
  endforeach()
  execute_process(COMMAND "${exe}" list --json ${GS_CASES} ${sel}
                  WORKING_DIRECTORY "${GS_WORKING_DIRECTORY}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "genfence_add_suite(${GS_NAME}): `genfence list --json ${GS_CASES}` failed (${rc}):\n${err}")
  endif()
  string(JSON n LENGTH "${json}")
  set(added 0)
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON id GET "${json}" ${i} id)
      string(JSON kind GET "${json}" ${i} kind)
      # the case's own backends filter: entries, "!name" excludes
      set(allow_pos)
      set(deny)
      string(JSON nb LENGTH "${json}" ${i} backends)
      if(nb GREATER 0)
        math(EXPR lb "${nb} - 1")
        foreach(j RANGE ${lb})
          string(JSON e GET "${json}" ${i} backends ${j})
          if(e MATCHES "^!(.*)")
            list(APPEND deny "${CMAKE_MATCH_1}")
          else()
            list(APPEND allow_pos "${e}")
          endif()
        endforeach()
      endif()
      set(labels genfence "${GS_NAME}" "kind:${kind}" ${GS_LABELS})
      string(JSON nt LENGTH "${json}" ${i} tags)
      if(nt GREATER 0)
        math(EXPR lt "${nt} - 1")
        foreach(j RANGE ${lt})
          string(JSON tag GET "${json}" ${i} tags ${j})
          list(APPEND labels "tag:${tag}")
        endforeach()
      endif()
      string(REGEX REPLACE "([][.^$*+?(){}|\\\\])" "\\\\\\1" id_re "${id}")
      foreach(b IN LISTS GS_BACKENDS)
        # a backend given by path is matched against the case's filter as that path
        list(FIND deny "${b}" d)
        list(FIND allow_pos "${b}" a)
        if(NOT d EQUAL -1 OR (allow_pos AND a EQUAL -1))
          continue()
        endif()
        get_filename_component(bname "${b}" NAME)
        set(test "${GS_NAME}/${id}@${bname}")
        add_test(NAME "${test}"
                 COMMAND "${exe}" run ${GS_CASES} --filter "^${id_re}$" --backend "${b}"
                         --report-dir "${GS_REPORT_DIR}/${id}@${bname}" ${GS_ARGS}
                 WORKING_DIRECTORY "${GS_WORKING_DIRECTORY}")
        set_tests_properties("${test}" PROPERTIES LABELS "${labels};backend:${bname}" TIMEOUT ${GS_TIMEOUT}
                             SKIP_REGULAR_EXPRESSION "(^|\n)skip +${id_re} \\[")
        math(EXPR added "${added} + 1")
      endforeach()
    endforeach()
  endif()
  message(STATUS "genfence suite ${GS_NAME}: ${added} tests (${n} cases x backends ${GS_BACKENDS})")
endfunction()
