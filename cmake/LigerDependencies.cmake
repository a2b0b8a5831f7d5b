# Every dependency comes from the system packages. A missing one stops the configure step with
# the Debian package that provides it, so the fix is one apt-get away.

function(liger_require_package name debian_package)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR
      "liger-agent: dependency '${name}' was not found.\n"
      "  Fix: sudo apt-get install ${debian_package}\n"
      "  (or run ./scripts/run-tests.sh, which installs every missing package)")
  endif()
endfunction()

if(LIGER_BUILD_AGENT)
  liger_require_package(CLI11 libcli11-dev CONFIG)
  liger_require_package(nlohmann_json nlohmann-json3-dev)
  liger_require_package(CURL libcurl4-openssl-dev)
  liger_require_package(fmt libfmt-dev)
  liger_require_package(spdlog libspdlog-dev)
  liger_require_package(yaml-cpp libyaml-cpp-dev)
  liger_require_package(Threads libc6-dev)

  # kainjow/mustache is header-only; the GPU machine lacks the package, so a copy of the header
  # may travel in .deps/include (git-ignored).
  find_path(LIGER_MUSTACHE_INCLUDE_DIR mustache.hpp
            HINTS "${CMAKE_SOURCE_DIR}/.deps/include" PATH_SUFFIXES kainjow)
  if(NOT LIGER_MUSTACHE_INCLUDE_DIR)
    message(FATAL_ERROR
      "liger-agent: header 'mustache.hpp' (kainjow mustache) was not found.\n"
      "  Fix: sudo apt-get install libkainjow-mustache-dev")
  endif()
  add_library(liger_mustache INTERFACE)
  target_include_directories(liger_mustache SYSTEM INTERFACE "${LIGER_MUSTACHE_INCLUDE_DIR}")
endif()

if(LIGER_BUILD_TESTS)
  liger_require_package(GTest libgtest-dev)
  include(GoogleTest)
endif()

# yaml-cpp's CMake config names its target differently across versions (Debian 12: yaml-cpp,
# Ubuntu 24.04: yaml-cpp::yaml-cpp).
if(TARGET yaml-cpp::yaml-cpp)
  set(LIGER_YAML_TARGET yaml-cpp::yaml-cpp)
elseif(TARGET yaml-cpp)
  set(LIGER_YAML_TARGET yaml-cpp)
endif()
