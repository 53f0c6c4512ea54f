// sanitized.h — kSanitized: true in a build under AddressSanitizer, ThreadSanitizer or MemorySanitizer
// (GCC defines __SANITIZE_*__, clang answers __has_feature). Tests that measure memory or time, or run
// long, use it to skip or shrink what a sanitizer's shadow memory and slowdown would distort.
#pragma once

namespace tapegrad::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace tapegrad::testing
