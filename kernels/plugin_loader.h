// plugin_loader.h — finds and opens the CUDA backend's plugin (libtapegrad_cuda.so, kernels/cuda_plugin_api.h)
// once, on the first call that needs a CUDA device (kernels/registry.cpp). Where it looks, in this order:
//   1. $TAPEGRAD_CUDA_PLUGIN, a file path; when set, the only place looked at;
//   2. the executable's folder (/proc/self/exe);
//   3. the build tree's plugin, when the executable lies in the build tree it was built in (tests, tools);
//   4. <executable's folder>/../<libdir> (an install moved elsewhere: bin/ beside lib/);
//   5. the install's libdir, compiled in (CMAKE_INSTALL_FULL_LIBDIR);
//   6. the dynamic loader's own search for the file name (LD_LIBRARY_PATH, ldconfig's cache).
// The first file that exists is opened (dlopen, RTLD_NOW); if it cannot be, that is the error, with
// dlerror()'s reason (e.g. a missing libcudart.so.13). Thread-safe (std::call_once); the outcome,
// the plugin or the error, is kept for the life of the process.
#pragma once
#include <string>
#include <vector>

#include "kernels/cuda_plugin_api.h"

namespace tapegrad::kernels {

// The plugin's table. Throws Error, one line, when there is none: "device cuda:0: the CUDA backend could
// not be loaded (<why>; tried <paths>)", or, in a build without the CUDA backend, that the build has none.
const CudaPluginApi& cuda_plugin(Device device);
// The same without throwing: nullptr when the plugin cannot be loaded (the reason: cuda_plugin's error).
const CudaPluginApi* try_cuda_plugin();
// The file the plugin was loaded from; empty before a load was attempted (this call attempts none) or when it failed.
std::string cuda_plugin_path();
// The places looked at, in order (1–6 above, those that apply to this build and process).
std::vector<std::string> cuda_plugin_candidates();

}  // namespace tapegrad::kernels
