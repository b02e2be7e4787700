/* config/'s own INI reader, used where inih is not installed (Windows
 * builds outside MSYS2; Debian has no mingw-w64 build of inih). It has
 * inih's interface and reads a file the way inih does with its default
 * options, so config.c gives the same settings and warnings with either:
 *   - "; ..." and "# ..." at the start of a line are comments, and so is
 *     "; ..." after a value when a space or tab comes before the ';';
 *   - "[name]" starts a section; "[name" without ']' is an error and the
 *     previous section goes on;
 *   - "key = value" or "key : value"; spaces around key and value dropped;
 *   - an indented line under a key continues it: the handler gets the
 *     same key again with that line's text;
 *   - a UTF-8 byte order mark before the first line is skipped;
 *   - any other line is an error.
 * tests/config runs one set of cases against both readers. */
#ifndef NIBBLE_CFG_INIFILE_H
#define NIBBLE_CFG_INIFILE_H

/* Lines longer than this (with the newline) come to the parser cut. */
#define CFG_INI_MAX_LINE 200

/* Returns nonzero to go on; 0 marks the line as an error. */
typedef int (*cfg_ini_handler)(void *user, const char *section, const char *key, const char *value);
/* Like fgets: fills str (num bytes) with the next line, NULL at the end. */
typedef char *(*cfg_ini_reader)(char *str, int num, void *stream);

/* Reads every line from reader and calls handler for each value. Returns
 * 0, or the number of the first line that was an error (reading goes on
 * after an error). */
int cfg_ini_parse_stream(cfg_ini_reader reader, void *stream, cfg_ini_handler handler, void *user);

#endif
