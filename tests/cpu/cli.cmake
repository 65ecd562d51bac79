# `ipu run` CLI tests (tests/cpu/cli_run_test.py): one CTest test per case.
if(TARGET ipu_cli)
  foreach(case npy pb data iterations perf check threads errors hostile popef popef_errors)
    add_test(NAME cli/run_${case}
      COMMAND "${IPU_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/cpu/cli_run_test.py" $<TARGET_FILE:ipu_cli> ${case})
    set_tests_properties(cli/run_${case} PROPERTIES LABELS "cli;cpu" TIMEOUT 300)
  endforeach()
  # It checks that two pipeline stages ran at once, which needs the machine's cores to itself.
  set_tests_properties(cli/run_popef PROPERTIES RUN_SERIAL TRUE)
endif()
