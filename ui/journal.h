/* A conversation as the user saw it, and its journal on disk.
 *
 * Entries are the user's messages, the replies (with their provenance:
 * model, template, kernel, threads, sampler, seed, timings, and marks
 * where a setting changed mid-reply) and notices. The journal is one
 * small text file rewritten whole through a temporary file that is
 * flushed, synced and renamed over the old one, so a crash or kill -9
 * leaves either the previous save or the new one, never a torn file.
 *
 * File format (UTF-8 text, one field a line, values escaped so a line
 * never contains a newline: \\ \n \r \t and \xHH for other control bytes):
 *   nibble-journal 1
 *   system TEXT
 *   entry user|assistant|notice
 *   partial 1                      (reply was still streaming)
 *   meta KEY VALUE                 (provenance, any number)
 *   mark BYTE TOKEN WHAT           (setting changed at byte BYTE / token TOKEN)
 *   text TEXT
 *   end
 * A file may start with a UTF-8 byte order mark and end its lines with
 * CR LF (an editor's doing); both are read, and saved as LF without BOM.
 *
 * Forward compatibility: lines this build does not know (a key it has
 * no use for, or a whole entry of a kind it does not know, up to the
 * next entry it knows) are kept verbatim, in order, with the entry they
 * follow (or the file's head), and written back on save, so an older
 * build that opens and saves a newer file loses nothing of it. Meta
 * keys it does not know are kept the same way (meta is open-ended); a
 * key given twice keeps both lines, the last one counts. */
#ifndef NIBBLE_ENG_JOURNAL_H
#define NIBBLE_ENG_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "files.h" /* eng_write_atomic, eng_mkdirs: what saving a journal uses */

enum eng_jkind { ENG_J_USER = 1, ENG_J_ASSISTANT, ENG_J_NOTICE };

typedef struct eng_jmark {
    size_t byte;     /* offset in the entry's text */
    uint32_t token;  /* reply token index */
    char *what;
} eng_jmark;

typedef struct eng_jmeta {
    char *key, *value;
} eng_jmeta;

typedef struct eng_jentry {
    enum eng_jkind kind;
    char *text;      /* NUL-terminated, len bytes */
    size_t len, cap;
    int partial;
    int transient;   /* shown but never saved (help, errors) */
    eng_jmeta *meta;
    size_t nmeta;
    eng_jmark *marks;
    size_t nmarks;
    char **extra;    /* lines this build does not know, verbatim (no newline) */
    size_t nextra;
    size_t cap_meta, cap_marks, cap_extra;
} eng_jentry;

/* Plain data: read the fields freely, change them through the functions. */
typedef struct eng_journal {
    char *system;    /* NULL: none */
    eng_jentry *e;
    size_t n, cap;
    char **extra;    /* unknown lines before the first entry, verbatim */
    size_t nextra, cap_extra;
} eng_journal;

eng_journal *eng_journal_new(void);
void eng_journal_free(eng_journal *j);
void eng_journal_clear(eng_journal *j);
/* Append an entry; returns its index or a negative code. text is copied. */
int eng_journal_add(eng_journal *j, enum eng_jkind kind, const char *text);
int eng_journal_append(eng_journal *j, size_t idx, const char *bytes, size_t n);
/* Set (replace) a provenance field; with a key given more than once (a
 * hand-edited file), the last one is replaced and is the one get sees. */
int eng_journal_meta(eng_journal *j, size_t idx, const char *key, const char *value);
const char *eng_journal_get_meta(const eng_journal *j, size_t idx, const char *key);
int eng_journal_mark(eng_journal *j, size_t idx, uint32_t token, const char *what);
int eng_journal_set_system(eng_journal *j, const char *text);

/* Write atomically (temp file in the same folder, fsync, rename). */
int eng_journal_save(const eng_journal *j, const char *path, eng_err *e);
/* Read a journal; e names the line that is wrong. Time and memory are
 * linear in the file's size; only a regular file of at most
 * ENG_JOURNAL_MAX bytes is read (see eng_read_file). */
int eng_journal_load(const char *path, eng_journal **out, eng_err *e);
#define ENG_JOURNAL_MAX ((size_t)256 << 20)

/* Remove the temporaries (NAME.nbj.tmp.PID) that saves killed midway left
 * in dir: those whose process is gone. Returns how many were removed. */
int eng_journal_clean_tmp(const char *dir);

/* Escape s for one line (caller frees); unescape in place, returning the
 * new length, or -1 for a malformed escape. */
char *eng_journal_escape(const char *s, size_t n);
long eng_journal_unescape(char *s);


#endif
