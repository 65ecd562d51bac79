# Lists a doctest executable's test cases as CTest tests, each labelled with its test suite.
# Run after each build of the executable (cmake -P). doctest's own discovery asks the executable
# once per test case for its suite; under the sanitizers, where starting a test binary costs most
# of a second, that made discovery minutes of the CI's build. This asks once per suite.
#   TEST_EXECUTABLE  the test program         TEST_PREFIX      prepended to every test name
#   TEST_WORKING_DIR where the tests run      TEST_PROPERTIES  extra set_tests_properties pairs
#   CTEST_FILE       the script written for CTest to include

set(semicolon "<:semicolon:>")

function(list_of what out)  # the lines doctest prints for --list-WHAT, its banner lines dropped
  execute_process(COMMAND "${TEST_EXECUTABLE}" ${ARGN} --list-${what}
    OUTPUT_VARIABLE output RESULT_VARIABLE result WORKING_DIRECTORY "${TEST_WORKING_DIR}")
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${TEST_EXECUTABLE} --list-${what} failed (${result}):\n${output}")
  endif()
  # A test name's ";" would split it in CMake's lists (the test then ran nothing and passed): it
  # travels as a placeholder, and the bracket arguments written below hold it again as ";".
  string(REPLACE ";" "${semicolon}" output "${output}")
  string(REPLACE "\n" ";" lines "${output}")
  set(names)
  foreach(line IN LISTS lines)
    if(line STREQUAL "" OR line MATCHES "^===+$" OR line MATCHES "^\\[doctest\\] ")
      continue()
    endif()
    list(APPEND names "${line}")
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

function(quoted value out)  # a bracket argument: test names hold spaces, quotes and semicolons
  set(${out} "[==[${value}]==]" PARENT_SCOPE)
endfunction()

list_of(test-cases cases)
list_of(test-suites suites)
foreach(suite IN LISTS suites)
  list_of(test-cases in_suite "--test-suite=${suite}")
  foreach(case IN LISTS in_suite)
    string(MD5 key "${case}")
    set(suite_of_${key} "${suite}")
  endforeach()
endforeach()

list(JOIN TEST_PROPERTIES " " properties)
set(script "")
foreach(case IN LISTS cases)
  string(MD5 key "${case}")
  string(REPLACE "${semicolon}" ";" case "${case}")
  # doctest's --test-case takes a comma-separated list of patterns.
  string(REPLACE "," "\\," filter "${case}")
  quoted("${TEST_PREFIX}${case}" name)
  quoted("--test-case=${filter}" argument)
  quoted("${TEST_EXECUTABLE}" executable)
  quoted("${TEST_WORKING_DIR}" directory)
  set(labels "")
  if(DEFINED suite_of_${key})
    quoted("${suite_of_${key}}" labels)
    set(labels " LABELS ${labels}")
  endif()
  # A filter that matches no test case runs nothing and exits 0: refused, so a name doctest and
  # CTest spell differently cannot pass unrun.
  string(APPEND script "add_test(${name} ${executable} ${argument})\n"
    "set_tests_properties(${name} PROPERTIES WORKING_DIRECTORY ${directory} "
    "FAIL_REGULAR_EXPRESSION [==[test cases: +0 [|]]==] ${properties}${labels})\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
