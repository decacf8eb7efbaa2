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
# LABELS. <backend> is the name the backend registers (a plugin given by
# path: ref-bad-cache, not libgenfence_test_ref_bad_cache.so). A case whose
# kind reaches no slot of a backend (`genfence list --json`: "reaches":
# "none", or "sample" on a backend without a sampler slot, `genfence
# backends --json`: "sample_slot") runs on the engine alone there: one test
# NAME/<id>@engine labelled engine, whichever backends it stands for.
# After genfence's output each test prints CTest's <DartMeasurement> lines
# from its report (max_abs_delta, min_margin, safety_factor, kl_divergence,
# where the case measured them), so CDash plots them. A skip (backend
# unavailable on this machine) is a CTest skip. The case files are configure
# dependencies: editing one reconfigures.
# Needs CMake 3.19 (string(JSON)).
cmake_minimum_required(VERSION 3.19)

# Script mode (the tests' command): run genfence, then print the report's
# measurements for CDash; exit 1 when genfence did not exit 0.
if(CMAKE_SCRIPT_MODE_FILE AND GENFENCE_SUITE_RUN)
  string(REPLACE "@gf-arg@" ";" _args "${GF_ARGS}")
  file(REMOVE "${GF_REPORT}") # a report left by an earlier run is not this run's
  execute_process(COMMAND "${GF_EXE}" ${_args} RESULT_VARIABLE _rc)
  if(EXISTS "${GF_REPORT}")
    file(READ "${GF_REPORT}" _doc)
    string(JSON _n ERROR_VARIABLE _e LENGTH "${_doc}" results)
    if(NOT _e AND _n GREATER 0)
      math(EXPR _last "${_n} - 1")
      foreach(_i RANGE ${_last})
        foreach(_m "summary;max_abs_delta;max_abs_delta" "summary;min_margin;min_margin"
                   "summary;safety_factor;safety_factor" "statistical;kld_mean;kl_divergence")
          list(GET _m 0 _part)
          list(GET _m 1 _key)
          list(GET _m 2 _name)
          string(JSON _t ERROR_VARIABLE _e TYPE "${_doc}" results ${_i} metrics ${_part} ${_key})
          if(NOT _e AND _t STREQUAL "NUMBER")
            string(JSON _v GET "${_doc}" results ${_i} metrics ${_part} ${_key})
            message("<DartMeasurement name=\"${_name}\" type=\"numeric/double\">${_v}</DartMeasurement>")
          elseif(NOT _e AND _t STREQUAL "NULL")
            # +inf (a safety factor when max |delta| is 0) has no JSON number: said as text, not plotted
            string(JSON _why ERROR_VARIABLE _e2 GET "${_doc}" results ${_i} metrics ${_part} ${_key}_reason)
            if(NOT _e2 AND _why MATCHES "^\\+inf")
              message("<DartMeasurement name=\"${_name}\" type=\"text/string\">inf</DartMeasurement>")
            endif()
          endif()
        endforeach()
      endforeach()
    endif()
  endif()
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "genfence exited ${_rc}")
  endif()
  return()
endif()

set(_GENFENCE_SUITE_FILE "${CMAKE_CURRENT_LIST_FILE}")

# What `genfence backends --json --backend B...` says of each BACKENDS entry:
# the name it registers (a plugin given by path: its registry name; its file
# name when it cannot be opened here) in _gf_bn_<id> and whether it has a
# sampler slot (1, 0, or empty: unknown) in _gf_bs_<id>, <id> the entry as a
# C identifier.
function(_genfence_backend_facts exe wd)
  set(_gf_bargs)
  foreach(_b IN LISTS ARGN)
    list(APPEND _gf_bargs --backend "${_b}")
  endforeach()
  execute_process(COMMAND "${exe}" backends --json ${_gf_bargs} WORKING_DIRECTORY "${wd}"
                  RESULT_VARIABLE _gf_rc OUTPUT_VARIABLE _gf_js ERROR_QUIET)
  set(_gf_len 0)
  if(_gf_rc EQUAL 0)
    string(JSON _gf_len ERROR_VARIABLE _gf_e LENGTH "${_gf_js}")
    if(_gf_e)
      set(_gf_len 0)
    endif()
  endif()
  foreach(_b IN LISTS ARGN)
    string(MAKE_C_IDENTIFIER "${_b}" _bk)
    get_filename_component(_gf_bn_${_bk} "${_b}" NAME)
    set(_gf_bs_${_bk} "")
    if(_gf_len GREATER 0)
      math(EXPR _gf_last "${_gf_len} - 1")
      foreach(_k RANGE ${_gf_last}) # the last entry of that name: the one given with --backend
        string(JSON _nm ERROR_VARIABLE _gf_e GET "${_gf_js}" ${_k} name)
        if(NOT _gf_e AND _nm STREQUAL _b)
          string(JSON _rn ERROR_VARIABLE _gf_e GET "${_gf_js}" ${_k} registered_name)
          if(NOT _gf_e AND _rn)
            set(_gf_bn_${_bk} "${_rn}")
          endif()
          string(JSON _ss ERROR_VARIABLE _gf_e GET "${_gf_js}" ${_k} sample_slot)
          if(NOT _gf_e)
            if(_ss)
              set(_gf_bs_${_bk} 1)
            else()
              set(_gf_bs_${_bk} 0)
            endif()
          endif()
        endif()
      endforeach()
    endif()
    set(_gf_bn_${_bk} "${_gf_bn_${_bk}}" PARENT_SCOPE)
    set(_gf_bs_${_bk} "${_gf_bs_${_bk}}" PARENT_SCOPE)
  endforeach()
endfunction()

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
  _genfence_backend_facts("${exe}" "${GS_WORKING_DIRECTORY}" ${GS_BACKENDS})
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
      string(JSON reach ERROR_VARIABLE _e GET "${json}" ${i} reaches)
      set(engine_done FALSE)
      foreach(b IN LISTS GS_BACKENDS)
        # a backend given by path is matched against the case's filter as that path
        list(FIND deny "${b}" d)
        list(FIND allow_pos "${b}" a)
        if(NOT d EQUAL -1 OR (allow_pos AND a EQUAL -1))
          continue()
        endif()
        string(MAKE_C_IDENTIFIER "${b}" bk)
        if(reach STREQUAL "none" OR (reach STREQUAL "sample" AND "${_gf_bs_${bk}}" STREQUAL "0"))
          # a kind that reaches no slot of this backend (stream_decode, left_padding_positions; the sampler
          # kinds on a backend without a sampler slot) runs on the engine alone: one test labelled engine,
          # not one per backend labelled with a backend it never touches
          if(engine_done)
            continue()
          endif()
          set(engine_done TRUE)
          set(bname engine)
          set(blabel engine)
        else()
          set(bname "${_gf_bn_${bk}}")
          set(blabel "backend:${bname}")
        endif()
        set(test "${GS_NAME}/${id}@${bname}")
        set(rdir "${GS_REPORT_DIR}/${id}@${bname}")
        set(run_args run ${GS_CASES} --filter "^${id_re}$" --backend "${b}" --report-dir "${rdir}" ${GS_ARGS})
        string(REPLACE ";" "@gf-arg@" run_joined "${run_args}")
        # through this file in script mode: genfence's output as is, then <DartMeasurement> lines (max |delta|,
        # smallest margin, safety factor, KL) from the run's report, which CTest hands to CDash to plot
        add_test(NAME "${test}"
                 COMMAND "${CMAKE_COMMAND}" -DGENFENCE_SUITE_RUN=1 "-DGF_EXE=${exe}" "-DGF_ARGS=${run_joined}"
                         "-DGF_REPORT=${rdir}/run.json" -P "${_GENFENCE_SUITE_FILE}"
                 WORKING_DIRECTORY "${GS_WORKING_DIRECTORY}")
        set_tests_properties("${test}" PROPERTIES LABELS "${labels};${blabel}" TIMEOUT ${GS_TIMEOUT}
                             SKIP_REGULAR_EXPRESSION "(^|\n)skip +${id_re} \\[")
        math(EXPR added "${added} + 1")
      endforeach()
    endforeach()
  endif()
  message(STATUS "genfence suite ${GS_NAME}: ${added} tests (${n} cases x backends ${GS_BACKENDS})")
endfunction()
