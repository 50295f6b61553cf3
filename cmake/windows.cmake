# windows.cmake - what the Windows build (MinGW-w64, WIN32) adds to the
# project: the third-party libraries as static IMPORTED targets from the
# prefix scripts/deps.sh --windows builds (CW_WIN_DEPS), under the same
# neutral names Linux gives its pkg-config ones (cw::sqlite3, cw::cjson,
# cw::expat, cw::civetweb, cw::threads), and the compile and link options
# of a static, reproducible commitwatch.exe for Windows 8 and later.
if(DEFINED ENV{XDG_CACHE_HOME})
  set(cw_cache "$ENV{XDG_CACHE_HOME}")
else()
  set(cw_cache "$ENV{HOME}/.cache")
endif()
set(CW_WIN_DEPS "${cw_cache}/commitwatch/win-deps" CACHE PATH
    "Prefix of the Windows static libraries (scripts/deps.sh --windows builds them)")

# C99 printf formats (%zu, %lld) from MinGW's own stdio, not msvcrt's;
# Windows 8 APIs (GetSystemTimePreciseAsFileTime).
add_compile_definitions(__USE_MINGW_ANSI_STDIO=1 _WIN32_WINNT=0x0602 WINVER=0x0602)
# Static: the .exe imports system DLLs only (no libgcc or winpthread DLL).
# No link time stamp in the PE header: two links are byte-identical.
add_link_options(-static -static-libgcc -Wl,--no-insert-timestamp)

function(cw_win_dep target lib)
  cmake_parse_arguments(D "" "" "DEFINES;LIBS" ${ARGN})
  set(path ${CW_WIN_DEPS}/lib/lib${lib}.a)
  if(NOT EXISTS ${path})
    message(FATAL_ERROR "${path} not found: build the Windows libraries with "
                        "`scripts/deps.sh --windows` (or set CW_WIN_DEPS to their prefix)")
  endif()
  add_library(${target} STATIC IMPORTED)
  set_target_properties(${target} PROPERTIES
    IMPORTED_LOCATION ${path}
    INTERFACE_INCLUDE_DIRECTORIES ${CW_WIN_DEPS}/include
    INTERFACE_COMPILE_DEFINITIONS "${D_DEFINES}"
    INTERFACE_LINK_LIBRARIES "${D_LIBS}")
endfunction()

cw_win_dep(cw::sqlite3 sqlite3)
cw_win_dep(cw::cjson cjson)
cw_win_dep(cw::expat expat DEFINES XML_STATIC)
cw_win_dep(cw::civetweb civetweb LIBS ws2_32)
# The pprof export: protobuf-c's runtime and zlib.
cw_win_dep(cw::protobufc protobuf-c)
cw_win_dep(cw::zlib z)
# Win32 threads live in kernel32: nothing to link.
add_library(cw::threads INTERFACE IMPORTED)
