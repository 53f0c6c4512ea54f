# install.cmake — `cmake --install` and `cpack -G DEB` for tapegrad: headers under include/tapegrad/,
# the static libraries, the CUDA backend's plugin libtapegrad_cuda.so (in a build that has one), the
# `tapegrad` tool, a CMake package (find_package(tapegrad), targets in the tapegrad:: namespace, umbrella
# target tapegrad::tapegrad), a pkg-config file and the .deb's metadata.
# Included from the top CMakeLists.txt after every library target exists; the build tree is unchanged.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TAPEGRAD_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/tapegrad")   # the include root: "autograd/tensor.h"
set(TAPEGRAD_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tapegrad")

# The umbrella target: every library layer, so a user links one name. In the build tree it is
# tapegrad_all (alias tapegrad::tapegrad); installed, it is exported as tapegrad::tapegrad.
add_library(tapegrad_all INTERFACE)
target_link_libraries(tapegrad_all INTERFACE tapegrad_lm tapegrad_dist tapegrad_data tapegrad_optim tapegrad_nn tapegrad
  tapegrad_kernels)
add_library(tapegrad::tapegrad ALIAS tapegrad_all)
# The headers need C++20 (std::span, concepts): a consumer gets it from the targets it links.
target_compile_features(tapegrad_all INTERFACE cxx_std_20)
set_property(TARGET tapegrad APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)

# Exported names: tapegrad::kernels, tapegrad::autograd (the target `tapegrad` in this build),
# tapegrad::nn, ::optim, ::data, ::dist, ::lm. tapegrad::warnings is the build's private compile flags; it is
# exported only because static libraries carry their private link dependencies (as $<LINK_ONLY:...>).
set_target_properties(tapegrad_all PROPERTIES EXPORT_NAME tapegrad)
set_target_properties(tapegrad_kernels PROPERTIES EXPORT_NAME kernels)
set_target_properties(tapegrad PROPERTIES EXPORT_NAME autograd)
set_target_properties(tapegrad_warnings PROPERTIES EXPORT_NAME warnings)
set(_tg_layers nn optim data dist lm)
foreach(layer IN LISTS _tg_layers)
  set_target_properties(tapegrad_${layer} PROPERTIES EXPORT_NAME ${layer})
endforeach()

install(TARGETS tapegrad_all tapegrad_kernels tapegrad tapegrad_nn tapegrad_optim tapegrad_data tapegrad_dist tapegrad_lm
  tapegrad_warnings
  EXPORT tapegradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${TAPEGRAD_INSTALL_INCLUDEDIR})

# The tool. OpenBLAS is linked by its full path in .../openblas-openmp/ (see the top CMakeLists.txt);
# keeping that directory in the installed RUNPATH makes the installed tool load the OpenMP build too,
# whatever Debian's libopenblas.so.0 alternative points at.
set_target_properties(tapegrad_tool PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS tapegrad_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tool)
# The CUDA backend's plugin, in the libdir its loader looks in (kernels/plugin_loader.h: <bin>/../libdir, then
# the libdir compiled in). Not an exported target: no program links it, the core opens it on the first use of
# a CUDA device. It finds the CUDA libraries (or TBB) through its RUNPATH (INSTALL_RPATH_USE_LINK_PATH).
if(TARGET tapegrad_cuda)
  install(TARGETS tapegrad_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tool)
endif()

# Headers, laid out as in the source tree. kernels/: only its top-level headers, which autograd/'s
# headers include (backend.h, dtype.h, shape.h, error.h, ...); the CPU and CUDA internals stay out.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/ DESTINATION ${TAPEGRAD_INSTALL_INCLUDEDIR}/kernels COMPONENT dev
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "cpu" EXCLUDE PATTERN "cuda" EXCLUDE)
foreach(dir autograd nn optim data dist lm)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${TAPEGRAD_INSTALL_INCLUDEDIR}/${dir} COMPONENT dev
    FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()

# The CMake package: targets + config (re-finds the dependencies) + version file.
install(EXPORT tapegradTargets NAMESPACE tapegrad:: DESTINATION ${TAPEGRAD_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tapegradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tapegradConfig.cmake
  INSTALL_DESTINATION ${TAPEGRAD_INSTALL_CMAKEDIR})
# 0.x: minor versions may break the API, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tapegradConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tapegradConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tapegradConfigVersion.cmake
  DESTINATION ${TAPEGRAD_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config. The libraries are static, so what they link privately is in Requires.private and
# Libs.private: link with `pkg-config --static --libs tapegrad`. No CUDA library (nor TBB) in either: the
# CUDA backend is the plugin above, which the core opens with dlopen (libdl).
set(TAPEGRAD_PC_CFLAGS "-fopenmp")
set(TAPEGRAD_PC_LIBS_PRIVATE "")
foreach(_tg_dl IN LISTS CMAKE_DL_LIBS)
  string(APPEND TAPEGRAD_PC_LIBS_PRIVATE " -l${_tg_dl}")
endforeach()
if(TAPEGRAD_MPI)  # dist/'s MPI communicator: Open MPI's link line (libmpi)
  set(TAPEGRAD_PC_REQUIRES_PRIVATE " ompi-c")
else()
  set(TAPEGRAD_PC_REQUIRES_PRIVATE "")
endif()
if(_tg_sanitizers)  # set by cmake/sanitize.cmake for a sanitizer build
  string(APPEND TAPEGRAD_PC_LIBS_PRIVATE " -fsanitize=${_tg_sanitizers}")
endif()
# Relocatable: the prefix is found from the .pc file's own folder, so `cmake --install --prefix P`
# and the .deb (prefix /usr) both work.
file(RELATIVE_PATH TAPEGRAD_PC_PREFIX_FROM_PCDIR "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${CMAKE_CURRENT_LIST_DIR}/tapegrad.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tapegrad.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tapegrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The Debian package: `cpack -G DEB` in the build folder → tapegrad_<version>_<arch>.deb, everything
# above under /usr. Depends: what the tool loads at run time, and the -dev packages a user of the CMake
# package or tapegrad.pc needs (the config re-finds them; the libraries are static). A CUDA build also
# needs the CUDA toolkit's cudart and cuBLAS for its plugin (usr/lib/.../libtapegrad_cuda.so, opened only for
# --device cuda), which are not Debian packages: add them with -DTAPEGRAD_DEB_EXTRA_DEPENDS="..." (a
# comma-separated Depends list) when packaging one; the tool starts and runs on the CPU without them.
set(TAPEGRAD_DEB_EXTRA_DEPENDS "" CACHE STRING "Extra Depends of the .deb (e.g. the CUDA toolkit's packages)")
set(CPACK_PACKAGE_NAME tapegrad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "tapegrad")
set(CPACK_PACKAGE_CONTACT "tapegrad maintainers <tapegrad@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++20 tape-based autograd library for training tiny language models")
set(CPACK_PACKAGE_DESCRIPTION "tapegrad records tensor operations on a tape and differentiates them
in reverse mode, on a CPU backend (OpenBLAS + OpenMP) and an optional CUDA
backend. This package holds the static libraries, the headers
(/usr/include/tapegrad), the CMake package (find_package(tapegrad)),
tapegrad.pc and the tapegrad command-line tool (tokenize, train, eval,
generate).")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)            # tapegrad_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libc6, libstdc++6, libgomp1, libopenblas0-openmp, libfmt9, libpcre2-8-0, libboost-program-options1.74.0, \
libopenblas-openmp-dev, libfmt-dev, libpcre2-dev, nlohmann-json3-dev, pkg-config")
if(TAPEGRAD_CUDA_EMULATED)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libtbb-dev")
endif()
if(TAPEGRAD_MPI)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libopenmpi-dev, openmpi-bin")
endif()
if(TAPEGRAD_DEB_EXTRA_DEPENDS)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", ${TAPEGRAD_DEB_EXTRA_DEPENDS}")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake, graphviz")
set(CPACK_GENERATOR DEB)
include(CPack)
