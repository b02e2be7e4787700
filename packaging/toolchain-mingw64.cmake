# Cross-compile for 64-bit Windows with mingw-w64 (Debian:
# apt-get install gcc-mingw-w64-x86-64-posix; the POSIX thread model brings
# winpthreads, which the engine's pthreads and clock_gettime use).
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=packaging/toolchain-mingw64.cmake \
#         -DNIBBLE_WIN_PREFIX=/path/to/prefix
# NIBBLE_WIN_PREFIX is a folder with Windows builds of the libraries:
# include/, lib/, lib/pkgconfig/. utf8proc is required (packaging/ci-windows.sh
# builds it from Debian's source package); inih is optional (config/inifile.c
# reads INI files without it). The full-screen chat needs PDCurses
# (-DPDCURSES_ROOT=..., or include/pdcurses/ and lib/ in that prefix;
# packaging/windows/README.md): NIBBLE_TUI is ON only when it is found.
# Test programs and nibble.exe run under wine (CMAKE_CROSSCOMPILING_EMULATOR)
# when it is installed, so ctest works as on a native build.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(NIBBLE_TRIPLE x86_64-w64-mingw32)

# the -posix variant when present: pthreads through winpthreads
find_program(NIBBLE_MINGW_CC NAMES ${NIBBLE_TRIPLE}-gcc-posix ${NIBBLE_TRIPLE}-gcc)
set(CMAKE_C_COMPILER ${NIBBLE_MINGW_CC})
set(CMAKE_RC_COMPILER ${NIBBLE_TRIPLE}-windres)

# The prefix reaches try_compile's own run of this file too (else that run
# would point pkg-config at the wrong folder for the rest of the configure).
set(NIBBLE_WIN_PREFIX "${NIBBLE_WIN_PREFIX}" CACHE PATH "Folder with Windows builds of utf8proc (and inih)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES NIBBLE_WIN_PREFIX)
set(CMAKE_FIND_ROOT_PATH /usr/${NIBBLE_TRIPLE} ${NIBBLE_WIN_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config: only the Windows .pc files, never the host's
if(NIBBLE_WIN_PREFIX)
  set(ENV{PKG_CONFIG_LIBDIR} "${NIBBLE_WIN_PREFIX}/lib/pkgconfig")
else()
  set(ENV{PKG_CONFIG_LIBDIR} "/usr/${NIBBLE_TRIPLE}/lib/pkgconfig")
endif()
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# one self-contained .exe: no libgcc or winpthread DLLs to carry along
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

find_program(NIBBLE_WINE NAMES wine64 wine)
if(NIBBLE_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NIBBLE_WINE})
endif()
