# The fuzz corpora replayed in every build, not only the clang libFuzzer
# one (tests/fuzz/CMakeLists.txt, -DNIBBLE_FUZZ=ON): each harness is linked
# with replay.c, a main() that feeds it the files named on its command
# line, against the project's normal libraries, so the default build, the
# ASan + UBSan build and the Windows cross build (under wine) run every
# seed once. Test fuzz_<t>_replay replays tests/fuzz/corpus/<t>/*.
# Included from tests/CMakeLists.txt; kept apart from the libFuzzer file,
# whose per-target source lists change on their own.
set(NB_REPLAY_DIR ${CMAKE_CURRENT_LIST_DIR})

# nb_replay(<target> [NAME <test>] LIBS <libraries>): harness fuzz_<target>.c
# against LIBS, replaying corpus/<target>/.
function(nb_replay t)
  cmake_parse_arguments(R "" "NAME" "LIBS" ${ARGN})
  if(NOT R_NAME)
    set(R_NAME fuzz_${t}_replay)
  endif()
  file(GLOB seeds CONFIGURE_DEPENDS ${NB_REPLAY_DIR}/corpus/${t}/*)
  add_executable(${R_NAME} ${NB_REPLAY_DIR}/replay.c ${NB_REPLAY_DIR}/fuzz_${t}.c)
  # tests/ for gguf_walk.h; engine/text for unicode.h (fuzz_vocab.h)
  target_include_directories(${R_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/engine/text)
  target_compile_definitions(${R_NAME} PRIVATE NIBBLE_ASSETS_DIR="${PROJECT_SOURCE_DIR}/assets")
  target_link_libraries(${R_NAME} PRIVATE ${R_LIBS})
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    # GCC (never the libFuzzer build's compiler) warns of a truncation in
    # fuzz_vocab.h's merge strings that the fixed short pairs cannot reach
    target_compile_options(${R_NAME} PRIVATE -Wno-format-truncation)
  endif()
  # no seed files: replay.c gets no argument and fails, as it should
  add_test(NAME ${R_NAME} COMMAND ${R_NAME} ${seeds})
  set_tests_properties(${R_NAME} PROPERTIES ENVIRONMENT "NIBBLE_ASSETS=${PROJECT_SOURCE_DIR}/assets")
endfunction()

nb_replay(gguf LIBS nibble_engine)
nb_replay(tokenizer LIBS nibble_engine)
nb_replay(template LIBS nibble_engine)
nb_replay(jinja LIBS nibble_engine)
nb_replay(config LIBS nibble_config nibble_base)
# config/'s own INI reader too, where inih is what nibble_config uses
if(TARGET nibble_config_ownini)
  nb_replay(config NAME fuzz_config_ownini_replay LIBS nibble_config_ownini nibble_base)
endif()
nb_replay(journal LIBS nibble_ui)
if(NIBBLE_TUI) # ui/markdown.c comes with the screen (md4c)
  nb_replay(markdown LIBS nibble_ui)
endif()
