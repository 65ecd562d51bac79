# Lists a doctest executable's test files as CTest tests: one test runs a file's test cases in one
# process, split by test suite so that each test carries its suite as a label (TEST_SUITE
# ("concurrent") marks what the TSan preset runs). One process per test case cost the sanitizer
# suites minutes: an instrumented binary takes 0.1-0.2 s to start and its leak scan as long to
# exit, for cases that mostly run in milliseconds. A failing test prints the failing case's name;
# `EXE --test-case=NAME` runs that case alone. Run after each build of the executable (cmake -P).
#   TEST_EXECUTABLE  the test program         TEST_PREFIX      prepended to every test name
#   TEST_WORKING_DIR where the tests run      TEST_PROPERTIES  extra set_tests_properties pairs
#   CTEST_FILE       the script written for CTest to include
cmake_minimum_required(VERSION 3.25)  # a script's policies (IN_LIST)

execute_process(COMMAND "${TEST_EXECUTABLE}" --list-test-cases --reporters=xml
  OUTPUT_VARIABLE listing RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-test-cases failed (${result}):\n${listing}")
endif()

# <TestCase name="..." [testsuite="..."] filename="..." line="..." .../>: the file and suite of each
# case (names are not needed, and may hold anything: their ";" would split CMake's lists, so every
# ";" goes first). Suites and paths of this project are plain words; one that is not would be
# misread here, so it is refused.
string(REPLACE ";" "," listing "${listing}")
string(REGEX MATCHALL "<TestCase [^\n]*/>" cases "${listing}")
if(NOT cases)
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test case:\n${listing}")
endif()
set(files)
foreach(case IN LISTS cases)
  if(NOT case MATCHES " filename=\"([^\"]+)\"")
    message(FATAL_ERROR "no filename in doctest's listing: ${case}")
  endif()
  set(file "${CMAKE_MATCH_1}")
  set(suite "")
  if(case MATCHES " testsuite=\"([^\"]*)\"")
    set(suite "${CMAKE_MATCH_1}")
  endif()
  if("${file}${suite}" MATCHES "[*?,;&\\\\]")
    message(FATAL_ERROR "ipu: a test file or suite name holds a character doctest's filters read "
      "(* ? , ; & \\): '${file}' '${suite}'. Rename it.")
  endif()
  string(MD5 key "${file}")
  if(NOT DEFINED suites_of_${key})
    list(APPEND files "${file}")
    set(suites_of_${key} "")
  endif()
  if(NOT "<${suite}>" IN_LIST suites_of_${key})
    list(APPEND suites_of_${key} "<${suite}>")
  endif()
  string(MD5 suite_key "${file}<${suite}>")
  if(NOT DEFINED cases_${suite_key})
    set(cases_${suite_key} 0)
  endif()
  math(EXPR cases_${suite_key} "${cases_${suite_key}} + 1")
endforeach()

list(JOIN TEST_PROPERTIES " " properties)
set(script "")
foreach(file IN LISTS files)
  string(MD5 key "${file}")
  get_filename_component(stem "${file}" NAME_WE)
  # The named suites of the file: their cases run apart, each test labelled with its suite.
  set(named "${suites_of_${key}}")
  list(REMOVE_ITEM named "<>")
  list(TRANSFORM named REPLACE "^<(.*)>$" "\\1")
  list(JOIN named "," named_filter)
  foreach(suite IN ITEMS "" ${named})
    if(NOT "<${suite}>" IN_LIST suites_of_${key})
      continue()
    endif()
    if(suite STREQUAL "")
      set(name "${TEST_PREFIX}${stem}")
      set(filter "")
      if(named)
        set(filter " [==[--test-suite-exclude=${named_filter}]==]")
      endif()
      set(labels "")
    else()
      set(name "${TEST_PREFIX}${stem} [${suite}]")
      set(filter " [==[--test-suite=${suite}]==]")
      set(labels " LABELS [==[${suite}]==]")
    endif()
    # A filter that matches no test case runs nothing and exits 0: refused, so a test that lost its
    # cases cannot pass unrun. The case count is the test's cost: without timings from an earlier
    # run (a fresh CI), CTest starts the costliest tests first, and the long files do not end the run alone.
    string(MD5 suite_key "${file}<${suite}>")
    string(APPEND script "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] [==[--source-file=${file}]==]${filter})\n"
      "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==] "
      "FAIL_REGULAR_EXPRESSION [==[test cases: +0 [|]]==] COST ${cases_${suite_key}} ${properties}${labels})\n")
  endforeach()
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
