# fuzz.cmake — the fuzz targets of tests/fuzz/ (docs/fuzzing.md); included at the end of tests/CMakeLists.txt.
#   Every build: fuzz_replay_<target>, the target's LLVMFuzzerTestOneInput with a plain main()
#     (tests/fuzz/replay_main.cpp), and a ctest "fuzz replay: <target>" that runs it on the committed seed
#     corpus tests/fuzz/corpus/<target>/ and on every input that ever crashed, tests/fuzz/regressions/<target>/.
#     fuzz_make_seeds (not built by default) writes the seed corpus with tapegrad's own writers.
#   TAPEGRAD_FUZZ=ON (clang, with TAPEGRAD_SANITIZE=address,undefined): also fuzz/fuzz_<target>, real
#     libFuzzer binaries (-fsanitize=fuzzer), and the libraries are compiled with -fsanitize=fuzzer-no-link
#     so that libFuzzer's coverage reaches into the readers. scripts/fuzz.sh configures and runs them.
option(TAPEGRAD_FUZZ "Build the libFuzzer targets of tests/fuzz/ (clang, TAPEGRAD_SANITIZE=address,undefined)" OFF)

set(TAPEGRAD_FUZZ_TARGETS safetensors token_file gpt2_files hf_tokenizer_json bpe_roundtrip checkpoint run_dir
    llama2c_model llama2c_tokenizer hf_config int8_model sft_data choices text_inputs)
set(_tg_fuzz_dir ${PROJECT_SOURCE_DIR}/tests/fuzz)
set(_tg_fuzz_libs tapegrad tapegrad_nn tapegrad_optim tapegrad_data tapegrad_lm)

if(TAPEGRAD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TAPEGRAD_FUZZ=ON needs clang (libFuzzer), but CMAKE_CXX_COMPILER is "
            "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER}: configure with -DCMAKE_C_COMPILER=clang-19 "
            "-DCMAKE_CXX_COMPILER=clang++-19 (scripts/fuzz.sh does)")
  endif()
  if(NOT (TAPEGRAD_SANITIZE STREQUAL "address,undefined" OR TAPEGRAD_SANITIZE STREQUAL "undefined,address"
          OR TAPEGRAD_SANITIZE STREQUAL "ON"))
    message(FATAL_ERROR "TAPEGRAD_FUZZ=ON needs -DTAPEGRAD_SANITIZE=address,undefined (the fuzzers run under "
            "ASan+UBSan), got '${TAPEGRAD_SANITIZE}'")
  endif()
  # Coverage instrumentation for libFuzzer in every library the targets reach (the link-time part,
  # libFuzzer itself, comes only with the fuzz_<target> executables).
  foreach(lib tapegrad_kernels ${_tg_fuzz_libs})
    target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
  endforeach()
endif()

foreach(t ${TAPEGRAD_FUZZ_TARGETS})
  add_executable(fuzz_replay_${t} ${_tg_fuzz_dir}/replay_main.cpp ${_tg_fuzz_dir}/fuzz_${t}.cpp)
  target_link_libraries(fuzz_replay_${t} PRIVATE ${_tg_fuzz_libs} tapegrad_warnings)
  add_test(NAME "fuzz replay: ${t}"
           COMMAND fuzz_replay_${t} ${_tg_fuzz_dir}/corpus/${t} ${_tg_fuzz_dir}/regressions/${t})
  set_tests_properties("fuzz replay: ${t}" PROPERTIES LABELS fuzz TIMEOUT 120
                       ENVIRONMENT "OMP_NUM_THREADS=1")
  if(TAPEGRAD_FUZZ)
    add_executable(fuzz_${t} ${_tg_fuzz_dir}/fuzz_${t}.cpp)
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${t} PRIVATE ${_tg_fuzz_libs} tapegrad_warnings)
    set_target_properties(fuzz_${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
  endif()
endforeach()

add_executable(fuzz_make_seeds EXCLUDE_FROM_ALL ${_tg_fuzz_dir}/make_seeds.cpp)
target_link_libraries(fuzz_make_seeds PRIVATE ${_tg_fuzz_libs} tapegrad_warnings)
