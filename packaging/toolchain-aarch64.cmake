# Cross-compile for 64-bit Arm Linux with Debian's gcc-aarch64-linux-gnu.
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=packaging/toolchain-aarch64.cmake
# Libraries (utf8proc, ncursesw, inih) come from Debian's arm64 multiarch
# packages: dpkg --add-architecture arm64; apt-get update;
# apt-get install libutf8proc-dev:arm64 libncurses-dev:arm64 libinih-dev:arm64.
# Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, so ctest works
# as on a native build).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(NIBBLE_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${NIBBLE_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${NIBBLE_TRIPLE}-g++)

# headers and libraries: the cross sysroot and the multiarch folders only
set(CMAKE_FIND_ROOT_PATH /usr/${NIBBLE_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${NIBBLE_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config: the arm64 .pc files, never the host's
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${NIBBLE_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

find_program(NIBBLE_QEMU NAMES qemu-aarch64-static qemu-aarch64)
if(NIBBLE_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NIBBLE_QEMU} -L /usr/${NIBBLE_TRIPLE})
endif()
