# Cross-compile for 64-bit Windows with mingw-w64 (Debian: apt-get install
# gcc-mingw-w64-x86-64-posix; the POSIX thread model brings winpthreads).
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=packaging/toolchain-mingw64.cmake \
#         -DNIBBLE_WIN_PREFIX=/path/to/mingw64
# NIBBLE_WIN_PREFIX is a folder with the Windows builds of utf8proc,
# PDCurses (or ncursesw) and inih: include/, lib/ and lib/pkgconfig/
# (for example an MSYS2 mingw64 tree copied over). Debian ships none of
# them for mingw-w64, so this cross build does not go through on a stock
# Debian machine yet; see packaging/windows/README.md for building on
# Windows itself. Test programs run under wine when it is installed.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(NIBBLE_TRIPLE x86_64-w64-mingw32)

# the -posix variant when present: C11 threads and pthreads through winpthreads
find_program(NIBBLE_MINGW_CC NAMES ${NIBBLE_TRIPLE}-gcc-posix ${NIBBLE_TRIPLE}-gcc)
set(CMAKE_C_COMPILER ${NIBBLE_MINGW_CC})
set(CMAKE_RC_COMPILER ${NIBBLE_TRIPLE}-windres)

set(NIBBLE_WIN_PREFIX "" CACHE PATH "Folder with Windows builds of utf8proc, PDCurses/ncursesw and inih")
set(CMAKE_FIND_ROOT_PATH /usr/${NIBBLE_TRIPLE} ${NIBBLE_WIN_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config: only the Windows .pc files
if(NIBBLE_WIN_PREFIX)
  set(ENV{PKG_CONFIG_LIBDIR} "${NIBBLE_WIN_PREFIX}/lib/pkgconfig")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
else()
  set(ENV{PKG_CONFIG_LIBDIR} "/usr/${NIBBLE_TRIPLE}/lib/pkgconfig")
endif()
set(ENV{PKG_CONFIG_PATH} "")

# one self-contained .exe: no libgcc / winpthread DLLs to carry along
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

find_program(NIBBLE_WINE NAMES wine64 wine)
if(NIBBLE_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NIBBLE_WINE})
endif()
