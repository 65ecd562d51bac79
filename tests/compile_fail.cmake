# Compile-time checks: each source must fail to compile with the library's `ipu:` static_assert
# message (PASS_REGULAR_EXPRESSION also fails the test on any other outcome, a clean compile
# included). Sources are tests/<area>/compile_fail/<name>.cpp. IPU_SEPARATE_KERNELS, as the
# project's programs compile: the kernels' definitions play no part in a concept's message, and
# leaving them out takes a check from 23 s to 7 s.
function(ipu_compile_fail area name expected)
  add_test(NAME ${area}/compile_fail/${name}
    COMMAND "${CMAKE_CXX_COMPILER}" -std=c++20 -fsyntax-only -DIPU_SEPARATE_KERNELS "-I${PROJECT_SOURCE_DIR}/include"
            "${CMAKE_CURRENT_SOURCE_DIR}/${area}/compile_fail/${name}.cpp")
  set_tests_properties(${area}/compile_fail/${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expected}"
                       LABELS "unit;${area}")
endfunction()

# The concepts' messages say how to fix the type.
ipu_compile_fail(device ipu_model_three_ipus "ipu: NumIpus must be a power of two")
ipu_compile_fail(device ipu_model_too_many_ipus "ipu: NumIpus must be between 1 and 64")
# A build switch with a value it does not take.
ipu_compile_fail(ops vector_copies_two "ipu: IPU_VECTOR_COPIES is 1 \\(the default")
ipu_compile_fail(core tensor_not_opted_in "ipu: this type is not a tensor; declare `using tensor_concept")
ipu_compile_fail(core tensor_without_bytes "ipu: a tensor needs `bytes\\(\\) const`")
ipu_compile_fail(graph graph_not_opted_in "ipu: this type is not a dataflow graph; opt in")
ipu_compile_fail(graph graph_without_conversion "ipu: a dataflow graph needs `to_ipu_graph\\(\\) const`")
ipu_compile_fail(sched strategy_without_schedule "ipu: an execution strategy names its schedule: `using schedule")
ipu_compile_fail(sched strategy_without_plan "ipu: an execution strategy needs `ipu::executable plan\\(")
ipu_compile_fail(sched schedule_without_jobs "ipu: a schedule needs `void add_jobs\\(")
ipu_compile_fail(sched schedule_not_opted_in "ipu: this type is not a schedule; declare `using schedule_concept")
