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

# Optimisation of test code: -O1 builds a third faster than -O2, and the code under test (the
# libraries) keeps -O2. Under the sanitizers GCC is slow to optimise instrumented code (at -O2 the
# sanitizer build took half of CI's time): libraries are built at -O1, tests at -O0.
set(ETCDW_TEST_OPTIMIZATION -O1)
if(ETCDW_SANITIZE)
  set(ETCDW_TEST_OPTIMIZATION -O0)
  add_compile_options(-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Files made of heavy template instantiation (Boost.Asio/Beast with OpenSSL, JSON) and little
# computation are built at -O0 under the sanitizers: each takes minutes at -O1 there. Called in
# the directory that adds the target (source file properties are per directory).
function(etcdw_sanitizer_quick_build)
  if(ETCDW_SANITIZE)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS -O0)
  endif()
endfunction()
