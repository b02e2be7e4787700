# PDCurses for the curses screen on Windows (ui/tui.c with ui/term_win.c).
# Looks in PDCURSES_ROOT when it is set (and only there), else in the usual
# places: CMAKE_PREFIX_PATH, NIBBLE_WIN_PREFIX when cross-compiling, MSYS2's
# /mingw64 or /ucrt64 on a native build. Wants the wincon port built with the
# wide API: include/pdcurses/curses.h (MSYS2's layout) or include/curses.h,
# and lib/libpdcurses_wincon.a or lib/libpdcurses.a (static; a DLL's import
# library is the last resort). Sets PDCURSES_FOUND and, when found, the target
# nibble::pdcurses; PDCURSES_WHY says what is missing otherwise.
set(PDCURSES_ROOT "" CACHE PATH "PDCurses (wincon, WIDE=Y UTF8=Y) folder with include/ and lib/")
set(NIBBLE_PDCURSES_DEFINES "PDC_WIDE;PDC_FORCE_UTF8;PDC_NCMOUSE" CACHE STRING
  "Macros the PDCurses header needs for the way the library was built (wide API, UTF-8, ncurses mouse)")

set(_pdc_names libpdcurses_wincon.a libpdcurses.a pdcurses_wincon pdcurses)
# another PDCURSES_ROOT than last time: look again
if(NOT "${PDCURSES_ROOT}" STREQUAL "${_NIBBLE_PDCURSES_ROOT_SEEN}")
  unset(PDCURSES_INCLUDE_DIR CACHE)
  unset(PDCURSES_LIBRARY CACHE)
  unset(NIBBLE_PDCURSES_WIDE CACHE)
  set(_NIBBLE_PDCURSES_ROOT_SEEN "${PDCURSES_ROOT}" CACHE INTERNAL "")
endif()
if(PDCURSES_ROOT)
  # explicit: only there, and not moved under the cross toolchain's roots
  find_path(PDCURSES_INCLUDE_DIR curses.h PATHS "${PDCURSES_ROOT}"
    PATH_SUFFIXES include/pdcurses include NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  find_library(PDCURSES_LIBRARY NAMES ${_pdc_names} PATHS "${PDCURSES_ROOT}"
    PATH_SUFFIXES lib NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
else()
  # <dir>/pdcurses before <dir> itself: a plain include/curses.h may be ncurses'
  find_path(PDCURSES_INCLUDE_DIR curses.h PATH_SUFFIXES pdcurses)
  find_library(PDCURSES_LIBRARY NAMES ${_pdc_names})
endif()

set(PDCURSES_FOUND FALSE)
set(PDCURSES_WHY "")
if(NOT PDCURSES_INCLUDE_DIR OR NOT PDCURSES_LIBRARY)
  set(PDCURSES_WHY "PDCurses not found (curses.h: ${PDCURSES_INCLUDE_DIR}; library: ${PDCURSES_LIBRARY})")
else()
  file(STRINGS "${PDCURSES_INCLUDE_DIR}/curses.h" _pdc_mark REGEX "define[ \t]+PDCURSES")
  if(NOT _pdc_mark)
    set(PDCURSES_WHY "${PDCURSES_INCLUDE_DIR}/curses.h is not PDCurses' (no PDCURSES macro)")
  else()
    # the screen needs the wide API (get_wch), which only a WIDE=Y build has
    include(CheckCSourceCompiles)
    set(CMAKE_REQUIRED_INCLUDES "${PDCURSES_INCLUDE_DIR}")
    set(CMAKE_REQUIRED_LIBRARIES "${PDCURSES_LIBRARY}")
    set(CMAKE_REQUIRED_DEFINITIONS "")
    foreach(_d IN LISTS NIBBLE_PDCURSES_DEFINES)
      list(APPEND CMAKE_REQUIRED_DEFINITIONS "-D${_d}")
    endforeach()
    unset(NIBBLE_PDCURSES_WIDE CACHE) # checked on every configure: the library may have been rebuilt
    check_c_source_compiles("#include <curses.h>
int main(void) { wint_t c; initscr(); get_wch(&c); resize_term(0, 0); return endwin(); }" NIBBLE_PDCURSES_WIDE)
    unset(CMAKE_REQUIRED_INCLUDES)
    unset(CMAKE_REQUIRED_LIBRARIES)
    unset(CMAKE_REQUIRED_DEFINITIONS)
    if(NIBBLE_PDCURSES_WIDE)
      set(PDCURSES_FOUND TRUE)
    else()
      set(PDCURSES_WHY "${PDCURSES_LIBRARY} has no wide API (get_wch): build PDCurses' wincon port with make WIDE=Y UTF8=Y (see CMakeFiles/CMakeError.log)")
    endif()
  endif()
endif()

if(PDCURSES_FOUND AND NOT TARGET nibble::pdcurses)
  add_library(nibble::pdcurses INTERFACE IMPORTED)
  set_target_properties(nibble::pdcurses PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${PDCURSES_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${PDCURSES_LIBRARY}"
    INTERFACE_COMPILE_DEFINITIONS "${NIBBLE_PDCURSES_DEFINES}")
endif()
