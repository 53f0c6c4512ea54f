# sanitize.cmake — the sanitizer builds, through the flags every tapegrad target gets (tapegrad_warnings).
#   TAPEGRAD_SANITIZE=address,undefined (ON means the same): AddressSanitizer (LeakSanitizer included)
#     + UndefinedBehaviorSanitizer; every finding aborts (-fno-sanitize-recover=all), so ctest fails on it.
#   TAPEGRAD_SANITIZE=thread: ThreadSanitizer (see docs/reliability.md for what it covers under OpenMP).
# Only C++ sources get the flags: nvcc does not take them (the sanitized builds turn TAPEGRAD_CUDA off).
set(TAPEGRAD_SANITIZE "" CACHE STRING "Sanitizers: empty (none), address,undefined (or ON), or thread")
if(TAPEGRAD_SANITIZE)
  if(TAPEGRAD_SANITIZE STREQUAL "ON" OR TAPEGRAD_SANITIZE STREQUAL "address,undefined"
     OR TAPEGRAD_SANITIZE STREQUAL "undefined,address")
    set(_tg_sanitizers address,undefined)
  elseif(TAPEGRAD_SANITIZE STREQUAL "thread")
    set(_tg_sanitizers thread)
  else()
    message(FATAL_ERROR "TAPEGRAD_SANITIZE=${TAPEGRAD_SANITIZE}: use address,undefined (or ON) or thread")
  endif()
  if(TAPEGRAD_CUDA)
    message(FATAL_ERROR "TAPEGRAD_SANITIZE needs -DTAPEGRAD_CUDA=OFF (nvcc-compiled code is not instrumented)")
  endif()
  set(_tg_san_flags -fsanitize=${_tg_sanitizers} -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
  target_compile_options(tapegrad_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_tg_san_flags}>)
  target_link_options(tapegrad_warnings INTERFACE -fsanitize=${_tg_sanitizers})
  message(STATUS "tapegrad: sanitizers ${_tg_sanitizers}")
endif()
