// plugin_loader.cpp — finds and opens libtapegrad_cuda.so once (see plugin_loader.h for the search order).
// CMake compiles the places in (kernels/CMakeLists.txt, on this file only): TAPEGRAD_CUDA_PLUGIN_NAME (defined
// only when this build makes the plugin), its build-tree path, the build tree, the install's libdir
// (relative and full) and the version the plugin must have.
#include "kernels/plugin_loader.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <utility>

#include "kernels/error.h"

namespace tapegrad::kernels {

namespace {

namespace fs = std::filesystem;

struct Candidate {
  std::string path;
  bool by_name = false;  // a bare file name: the dynamic loader searches its own path for it
};

// What the one attempt to load the plugin left: the table, or the reason there is none.
struct LoadOutcome {
  const CudaPluginApi* api = nullptr;
  std::string path;           // the file the table came from
  std::string error;          // why there is no table (no "device cuda:N: " prefix)
  bool built_without = false;  // this build has no CUDA backend at all
};

LoadOutcome failure(std::string why, bool built_without = false) {
  LoadOutcome o;
  o.error = std::move(why);
  o.built_without = built_without;
  return o;
}

#if defined(TAPEGRAD_CUDA_PLUGIN_NAME)
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// True when `path` is `dir` or lies below it (both made canonical where they exist).
bool lies_under(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  const fs::path d = fs::weakly_canonical(dir, ec);
  const fs::path rel = p.lexically_relative(d);
  return !rel.empty() && *rel.begin() != "..";
}
#endif

std::vector<Candidate> candidates() {
  std::vector<Candidate> out;
#if defined(TAPEGRAD_CUDA_PLUGIN_NAME)
  if (const char* env = std::getenv("TAPEGRAD_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    out.push_back({env});
    return out;
  }
  const fs::path exe_dir = executable_dir();
  if (!exe_dir.empty()) out.push_back({(exe_dir / TAPEGRAD_CUDA_PLUGIN_NAME).string()});
  if (!exe_dir.empty() && lies_under(exe_dir, TAPEGRAD_BUILD_TREE)) out.push_back({TAPEGRAD_CUDA_PLUGIN_BUILD_PATH});
  if (!exe_dir.empty()) {
    const fs::path relocated_libdir = exe_dir.parent_path() / TAPEGRAD_INSTALL_LIBDIR;
    out.push_back({(relocated_libdir / TAPEGRAD_CUDA_PLUGIN_NAME).lexically_normal().string()});
  }
  out.push_back({(fs::path(TAPEGRAD_INSTALL_FULL_LIBDIR) / TAPEGRAD_CUDA_PLUGIN_NAME).string()});
  out.push_back({TAPEGRAD_CUDA_PLUGIN_NAME, true});
  // The same file reached twice (an executable in the install's bin/) is looked at once.
  std::vector<Candidate> unique;
  for (const Candidate& c : out) {
    bool seen = false;
    for (const Candidate& u : unique) seen = seen || u.path == c.path;
    if (!seen) unique.push_back(c);
  }
  out = unique;
#endif
  return out;
}

#if defined(TAPEGRAD_CUDA_PLUGIN_NAME)
std::string tried_list(const std::vector<std::string>& tried) {
  std::string s;
  for (const std::string& t : tried) s += (s.empty() ? "" : ", ") + t;
  return s;
}

std::string last_dlerror() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}
#endif

LoadOutcome load() {
#if !defined(TAPEGRAD_CUDA_PLUGIN_NAME)
  return failure("this build of tapegrad has no CUDA backend (configure with -DTAPEGRAD_CUDA=ON where nvcc is "
                 "installed, or -DTAPEGRAD_CUDA_EMULATED=ON to emulate one)",
                 /*built_without=*/true);
#else
  std::vector<std::string> tried;
  for (const Candidate& c : candidates()) {
    std::error_code ec;
    if (!c.by_name && !fs::exists(c.path, ec)) {
      tried.push_back(c.path);
      continue;
    }
    (void)dlerror();
    void* handle = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::string why = last_dlerror();
      // The bare name not found anywhere on the loader's path is one more place tried, not an error.
      const bool nowhere = why.find("cannot open shared object file") != std::string::npos;
      if (c.by_name && why.starts_with(c.path + ":") && nowhere) {
        tried.push_back(c.path + " (the dynamic loader's search path)");
        continue;
      }
      if (!why.starts_with(c.path)) why = c.path + ": " + why;
      return failure(tried.empty() ? why : why + "; tried before it " + tried_list(tried));
    }
    const auto entry = reinterpret_cast<CudaPluginEntryPoint>(dlsym(handle, kCudaPluginEntryPoint));
    if (entry == nullptr) {
      dlclose(handle);
      return failure(fmt::format("{}: it has no {}(): not a tapegrad CUDA plugin", c.path, kCudaPluginEntryPoint));
    }
    // Kept open from here on, also when refused below: its initialisers have run.
    const CudaPluginApi* api = entry();
    const std::string_view version = api != nullptr && api->version != nullptr ? api->version : "?";
    if (api == nullptr || api->struct_size != sizeof(CudaPluginApi) || version != TAPEGRAD_VERSION_STRING)
      return failure(fmt::format("{}: a plugin of another tapegrad build (version {}, table of {} bytes; this is "
                                 "version {}, {} bytes): use the libtapegrad_cuda.so built with this tapegrad",
                                 c.path, version, api != nullptr ? api->struct_size : 0u, TAPEGRAD_VERSION_STRING,
                                 sizeof(CudaPluginApi)));
    LoadOutcome loaded;
    loaded.api = api;
    loaded.path = c.path;
    return loaded;
  }
  return failure(fmt::format("no {} found; tried {}", TAPEGRAD_CUDA_PLUGIN_NAME, tried_list(tried)));
#endif
}

// The outcome once the attempt was made, else null (read without making it).
std::atomic<const LoadOutcome*> g_outcome{nullptr};

const LoadOutcome& outcome() {
  static std::once_flag once;
  static LoadOutcome result;
  std::call_once(once, [] {
    result = load();
    g_outcome.store(&result, std::memory_order_release);
  });
  return result;
}

}  // namespace

const CudaPluginApi& cuda_plugin(Device device) {
  const LoadOutcome& o = outcome();
  if (o.api != nullptr) return *o.api;
  if (o.built_without) throw Error(fmt::format("device {}: {}", device, o.error));
  throw Error(fmt::format("device {}: the CUDA backend could not be loaded ({})", device, o.error));
}

const CudaPluginApi* try_cuda_plugin() { return outcome().api; }

std::string cuda_plugin_path() {
  const LoadOutcome* o = g_outcome.load(std::memory_order_acquire);
  return o != nullptr ? o->path : std::string();
}

std::vector<std::string> cuda_plugin_candidates() {
  std::vector<std::string> out;
  for (const Candidate& c : candidates()) out.push_back(c.path);
  return out;
}

}  // namespace tapegrad::kernels
