# learn_mistakes.cmake — proves that chapter 2b's check catches the three classic mistakes of a hand-written
# backward (docs/learn/02b_write_backward.md). For each mistake, the chapter's program is copied with one
# shipped line replaced by the mistaken one, as a learner might write it, and built as
# build/examples/learn/mistake_NAME/02b_write_backward; the test runs the chapter's docs check on that
# build, and passes only when the check fails with the program's MISMATCH line naming the mistake.
# If the chapter's program no longer holds the line, the copy is a program that says so and fails.
# Included from examples/learn/CMakeLists.txt (inside if(BUILD_TESTING)).
set(_tg_2b_source ${CMAKE_CURRENT_SOURCE_DIR}/02b_write_backward.cpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_tg_2b_source})

# tapegrad_learn_mistake(NAME RIGHT WRONG EXPECT): replace RIGHT by WRONG; the check's output must match EXPECT.
function(tapegrad_learn_mistake name right wrong expect)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/mistake_${name})
  file(READ ${_tg_2b_source} text)
  string(FIND "${text}" "${right}" at)
  if(at EQUAL -1)
    string(REPLACE "\"" "\\\"" quoted "${right}")
    set(text "#include <cstdio>\nint main() {\n  std::puts(\"MISMATCH: examples/learn/02b_write_backward.cpp no \"\n"
             "            \"longer holds the line this test breaks: ${quoted}\");\n  return 1;\n}\n")
  else()
    string(REPLACE "${right}" "${wrong}" text "${text}")
  endif()
  file(WRITE ${dir}/02b_write_backward.cpp.in "${text}")
  configure_file(${dir}/02b_write_backward.cpp.in ${dir}/02b_write_backward.cpp COPYONLY)  # rebuilt on change only
  add_executable(learn_mistake_${name} ${dir}/02b_write_backward.cpp)
  set(TAPEGRAD_LEARN_TARGETS ${TAPEGRAD_LEARN_TARGETS} learn_mistake_${name} PARENT_SCOPE)
  set_target_properties(learn_mistake_${name} PROPERTIES OUTPUT_NAME 02b_write_backward RUNTIME_OUTPUT_DIRECTORY ${dir})
  target_include_directories(learn_mistake_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(learn_mistake_${name} PRIVATE tapegrad tapegrad_warnings)
  set(test "learn: 02b_write_backward.cpp's check catches ${expect}")
  add_test(NAME "${test}" COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/learn_docs_check.py
    ${PROJECT_SOURCE_DIR}/docs/learn/02b_write_backward.md ${dir})
  string(REPLACE "+" "\\+" expect_re "${expect}")
  set_tests_properties("${test}" PROPERTIES PASS_REGULAR_EXPRESSION "MISMATCH: ${expect_re} — " TIMEOUT 300
    ENVIRONMENT "OMP_NUM_THREADS=1")
endfunction()

# The forward order instead of the reverse one.
tapegrad_learn_mistake(order "std::views::reverse(steps)" "steps" "wrong order")
# Assigning each share instead of adding it: wrong only for a value read twice (the program's third graph).
tapegrad_learn_mistake(accumulate "grad[in.name] = grad[in.name] + local[i];" "grad[in.name] = local[i];"
  "missing +=")
# mul's local rule with the inputs not swapped: each input gets g times itself instead of the other input.
tapegrad_learn_mistake(rule "return {g * b, g * a};" "return {g * a, g * b};" "wrong local rule")
