# find_package(genfence CONFIG): the installed genfence executable
# (GENFENCE_EXECUTABLE) and genfence_add_suite() (GenfenceSuite.cmake).
get_filename_component(_gf_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
find_program(GENFENCE_EXECUTABLE genfence HINTS "${_gf_prefix}/bin" NO_DEFAULT_PATH)
include("${CMAKE_CURRENT_LIST_DIR}/GenfenceSuite.cmake")
set(genfence_FOUND TRUE)
# the installed default suite: cases/, golden/, models/
get_filename_component(GENFENCE_DATA_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
