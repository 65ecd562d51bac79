# Compile-time checks of the device model: each source must fail to compile with the library's
# `ipu:` static_assert message (PASS_REGULAR_EXPRESSION also fails the test on any other outcome).
function(ipu_device_compile_fail name expected)
  add_test(NAME device/compile_fail/${name}
    COMMAND "${CMAKE_CXX_COMPILER}" -std=c++20 -fsyntax-only "-I${PROJECT_SOURCE_DIR}/include"
            "${CMAKE_CURRENT_SOURCE_DIR}/device/compile_fail/${name}.cpp")
  set_tests_properties(device/compile_fail/${name} PROPERTIES PASS_REGULAR_EXPRESSION "${expected}"
                       LABELS "unit;device")
endfunction()

ipu_device_compile_fail(ipu_model_three_ipus "ipu: NumIpus must be a power of two")
ipu_device_compile_fail(ipu_model_too_many_ipus "ipu: NumIpus must be between 1 and 64")
