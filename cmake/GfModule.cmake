# Helpers for the vendor backend modules.
include(GNUInstallDirs)

# gf_backend_folder(NAME): add backends/NAME and register NAME with the
# backend registry (the global property GF_BACKEND_MODULES feeds the
# registry's list of module names at configure time).
# gf_backend_folder(NAME [ON_REQUEST]): ON_REQUEST marks a backend that runs
# only when named: one that needs a config (exec:CMD) to run anything, or a
# third-party engine under test (llamacpp), whose findings belong in its own
# report (docs/llamacpp.md), not in the default suite's verdict. `genfence run`
# without --backend leaves it out of its default list
# (GF_BACKEND_ON_REQUEST -> the registry).
macro(gf_backend_folder name)
  set_property(GLOBAL APPEND PROPERTY GF_BACKEND_MODULES ${name})
  if("${ARGN}" STREQUAL "ON_REQUEST")
    set_property(GLOBAL APPEND PROPERTY GF_BACKEND_ON_REQUEST ${name})
  endif()
  add_subdirectory(${name})
endmacro()

# gf_backend_mode(VAR OPTION DOC): define the cache variable OPTION
# (ON|OFF|AUTO, default AUTO) and set VAR to ON, OFF or AUTO.
function(gf_backend_mode out opt doc)
  set(${opt} AUTO CACHE STRING "${doc} (ON, OFF or AUTO: built when the library is found)")
  set_property(CACHE ${opt} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${opt}}" v)
  if(v STREQUAL "AUTO")
    set(${out} AUTO PARENT_SCOPE)
  elseif(${opt})
    set(${out} ON PARENT_SCOPE)
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# gf_backend_missing(MODE OPTION NAME WHY): a configure error when MODE is ON,
# a status line when AUTO.
function(gf_backend_missing mode opt name why)
  if(mode STREQUAL "ON")
    message(FATAL_ERROR "${opt}=ON but the ${name} backend cannot be built: ${why}")
  endif()
  message(STATUS "genfence: ${name} backend not built (${why})")
endfunction()

# gf_add_backend_module(NAME SOURCES...): libgenfence_backend_NAME.so in
# ${CMAKE_BINARY_DIR}/backends (the registry's default module directory),
# linked with the shared helpers, exporting only genfence_backend_entry, with
# no undefined symbols left for the loader to find in genfence.
function(gf_add_backend_module name)
  set(target genfence_backend_${name})
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE gf_host_forward)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME genfence_backend_${name}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/backends
    C_VISIBILITY_PRESET hidden)
  # -z nodelete: dlclose must not unmap a vendor runtime whose worker threads
  # (OpenMP, OpenBLAS) are still parked in it
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--exclude-libs,ALL -Wl,-Bsymbolic -Wl,-z,nodelete)
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/genfence/backends)
  message(STATUS "genfence: ${name} backend module will be built")
endfunction()
