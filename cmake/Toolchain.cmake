# Compiler settings shared by every target.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)

if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# Release keeps assert(): the tests run optimised code with its invariants checked.
set(CMAKE_CXX_FLAGS_RELEASE "-O2" CACHE STRING "" FORCE)

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
endif()

# GCC 12 warns about members left out of designated initializers, the idiom for option structs.
add_compile_options(-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)

# Optimisation levels, chosen for CI's time on two cores (most of it is compiling):
# - Release: libraries -O2 (CMAKE_CXX_FLAGS_RELEASE); test code -O1, a third faster to build.
# - Sanitizers: GCC optimises instrumented code slowly (at -O2 the sanitizer build took half of
#   CI's time), so everything is -O0 except the hot code the tests spend their time in: the
#   storage, Raft and MVCC libraries and the Raft simulation, at -O1 (etcdw_hot_code).
# Options are set per target: CMake drops a repeated option, so a later "-O1" after an earlier
# "-O1" in the same list would vanish.
set(ETCDW_TEST_OPTIMIZATION -O1)
set(ETCDW_HOT_OPTIMIZATION -O2)
if(ETCDW_SANITIZE)
  set(ETCDW_TEST_OPTIMIZATION "")
  set(ETCDW_HOT_OPTIMIZATION -O1)
  add_compile_options(-O0 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

function(etcdw_hot_code target)
  target_compile_options(${target} PRIVATE ${ETCDW_HOT_OPTIMIZATION})
endfunction()
