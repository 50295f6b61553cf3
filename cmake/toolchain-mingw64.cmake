# Cross-compiling commitwatch for 64-bit Windows with MinGW-w64 (Debian's
# gcc-mingw-w64-x86-64), the tests run under Wine:
#
#   scripts/deps.sh --windows
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-mingw64.cmake \
#         -DCW_WIN_DEPS=$HOME/.cache/commitwatch/win-deps -DCW_WERROR=ON
#   cmake --build build-win -j2 && (cd build-win && ctest)
#
# ctest runs each test .exe through CMAKE_CROSSCOMPILING_EMULATOR,
# scripts/wine_run.sh (a private Wine prefix, no display, stdin from
# /dev/null). scripts/test_windows.sh does all of it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(CW_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${CW_MINGW_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${CW_MINGW_TRIPLE}-g++)
set(CMAKE_RC_COMPILER ${CW_MINGW_TRIPLE}-windres)
set(CMAKE_AR ${CW_MINGW_TRIPLE}-ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${CW_MINGW_TRIPLE}-ranlib CACHE FILEPATH "")

# Headers and libraries of the target only from MinGW's sysroot (and the
# deps prefix, which the project adds); programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${CW_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The test programs run under Wine.
get_filename_component(CW_WINE_RUN ${CMAKE_CURRENT_LIST_DIR}/../scripts/wine_run.sh ABSOLUTE)
set(CMAKE_CROSSCOMPILING_EMULATOR ${CW_WINE_RUN})
