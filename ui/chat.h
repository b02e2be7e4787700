/* The chat as both front ends (curses and line mode) run it: the
 * conversation document and its journal, the last state the engine
 * reported, and the user's actions (slash commands, settings, stop,
 * regenerate, model switch) turned into engine commands. No terminal
 * I/O here: the front ends draw ch->doc and the fields below. */
#ifndef NIBBLE_UI_CHAT_H
#define NIBBLE_UI_CHAT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "journal.h"

/* Settings for one model file, as the app computes them (config file,
 * its [model:NAME] section, and the command-line flags over both). */
typedef struct ui_model_settings {
    eng_gen_params gen;
    int threads;        /* 0: physical cores */
    int n_ctx;          /* 0: model default */
    char cache_k[8], cache_v[8]; /* K and V cache types ("f16", "q8_0", "q4_0"; "": f16) */
    char kernel[24];    /* "": leave as is */
    char tmpl[16];      /* "auto", "none", "chatml", ... */
    char system[2048];  /* "": none */
    /* speculative decoding turned on once the model has loaded: the
     * draft model's path, resolved ("": none), the lookup n-gram length
     * (0: off) and tokens per check (0: the engine's default) */
    char draft[1024];
    int lookup, draft_max;
} ui_model_settings;

typedef void (*ui_settings_fn)(void *ud, const char *model_path, ui_model_settings *out);

typedef struct ui_chat_opts {
    const char *data_dir;  /* e.g. ~/.local/share/nibble; NULL: nothing is saved */
    const char *resume;    /* NULL: a new conversation; "": the latest; else a name */
    const char *model;     /* model file to open first */
    int model_given;       /* model came from -m: it wins over a resumed conversation's */
    ui_settings_fn settings;
    void *settings_ud;
    const char *const *model_dirs; /* folders the model menu scans */
    int n_dirs;
} ui_chat_opts;

enum ui_action { UI_ACT_NONE = 0, UI_ACT_QUIT, UI_ACT_HELP,
                 UI_ACT_EDIT /* /edit: the front end puts ui_chat_editing_text in its input */ };

#define UI_SPARK 48

typedef struct ui_chat {
    eng_engine *en;
    eng_journal *doc;
    char data_dir[1024];
    char name[128];        /* conversation name: the journal's file name */
    char jpath[1400];
    const char *const *model_dirs;
    int n_dirs;
    ui_settings_fn settings;
    void *settings_ud;

    int busy;              /* a reply runs (SUBMIT/REGENERATE sent, no DONE yet) */
    int editing;           /* doc index of the message being edited, -1: none */
    int loading;           /* LOAD sent, no LOADED or ERROR yet */
    int have_model;
    char loading_path[1024];
    eng_state st;          /* last LOADED / STATE */
    eng_gen_params gen;    /* what the sliders show */
    eng_stats stats;       /* latest STATS / DONE */
    double ttft_ms, prefill_tps, decode_tps;
    double plain_tps;      /* plain decoding's rate on this model, while speculation
                            * runs: its checks that drafted nothing (eng_stats),
                            * else the last reply without speculation; 0 unknown */
    float spark[UI_SPARK]; /* recent decode tok/s, oldest first */
    int nspark;
    int reply;             /* doc index of the reply being written, -1 */
    uint32_t reply_tokens; /* that reply's tokens so far (its TOKEN events) */
    int reply_thought;     /* its thinking has ended (and "think_tokens" is set) */
    unsigned doc_gen;      /* changes when the document is replaced or cleared
                            * (/new, /load): what front ends cached from its
                            * entries is stale then */
    int prog_active;
    int prog_stage;        /* enum eng_stage of the progress shown (eng_stage_name for its name) */
    double prog_frac, prog_eta, prog_t0;
    int load_error;        /* the last LOAD failed (the menu may reopen) */
    char last_error[512];
    double last_save_ms;
    int gen_pending;       /* ui_chat_set_gen_soon: gen not yet sent */
    double gen_due;        /* when it is sent (ui_now_ms) */
    int unsaved;           /* the doc changed since the last save */
    int on_disk;           /* jpath was written for this conversation (a file is
                            * made at the first message, never before) */
    int orphan;            /* a reply left behind by /new is still ending: its
                            * events belong to no document */
    char *refused;         /* a message the engine refused (too long for the
                            * context), for the front end to give back to the
                            * input; it owns and frees it. NULL: none */
    char *clip;            /* text /copy asked to put on the clipboard; the
                            * front end sends it (ui_osc52) and frees it */
    char pending_load[1024]; /* a model switch asked for during a reply: done at its end */
    ui_model_settings load_set; /* the settings of the model being loaded: applied
                                 * when it has loaded, so a failed load keeps the old ones */
    ui_model_settings spec_set; /* its speculative decoding (draft, lookup), sent
                                 * at LOADED (a LOAD turns speculation off) */
    char spec_for[1024];   /* the model spec_set belongs to ("": none) */
    char draft_last[1024]; /* the draft model last on (or configured) for the
                            * model in use, which the menu can turn on ("": none) */
    int spec_cfg;          /* that SET_SPEC was sent and has not answered: an
                            * error then names the settings it came from */
    /* A question the user answers before something is destroyed (/save
     * NAME over another saved conversation): the front end shows it, takes
     * y or anything else, and calls ui_chat_answer. "": none asked. */
    char ask[320];
    char ask_name[128];    /* the conversation /save would overwrite */
    unsigned changed;      /* UI_CH_* since the front end last looked */
    /* a front end's signal flag: when it is set, long actions (the turns
     * of /load) stop early so the front end can leave. NULL: none */
    const volatile sig_atomic_t *cancel;
} ui_chat;

enum { UI_CH_DOC = 1, UI_CH_STATE = 2, UI_CH_STATS = 4, UI_CH_PROGRESS = 8 };

/* Set up: resume a conversation if asked, open the first model. Returns 0
 * or a negative code with e filled (the front end should still run when
 * only the resume failed: that is reported as a notice). */
int ui_chat_init(ui_chat *ch, eng_engine *en, const ui_chat_opts *o, eng_err *e);
/* Final save; frees the document (not the engine). */
void ui_chat_close(ui_chat *ch);

/* End a running reply before the front end leaves: STOP, then its events
 * for up to wait_ms, so the text and figures that were on their way are
 * kept. cut: the user did not ask for this (SIGTERM, SIGHUP, SIGPIPE):
 * the reply is marked cut short (partial), as a kill leaves it, and a
 * model switch waiting for its end is dropped. Shared by both front ends. */
void ui_chat_end_reply(ui_chat *ch, int wait_ms, int cut);

/* Take every waiting event; returns how many. */
int ui_chat_pump(ui_chat *ch);
/* Save the journal if due (every ~0.5 s while a reply streams). */
void ui_chat_tick(ui_chat *ch);
/* Milliseconds the front end may sleep before ui_chat_tick is due; -1: no timer. */
int ui_chat_timeout(const ui_chat *ch);

/* A line the user entered: a slash command or a message. */
enum ui_action ui_chat_input(ui_chat *ch, const char *text);
/* The answer to ch->ask: yes does what was asked, anything else keeps
 * what was there and says so. Does nothing when nothing is asked. */
void ui_chat_answer(ui_chat *ch, int yes);
/* 1 when a line typed as the answer means yes ("y" or "yes", any case). */
int ui_chat_is_yes(const char *line);
/* Actions behind the keys and menus. */
void ui_chat_stop(ui_chat *ch);
void ui_chat_regen(ui_chat *ch);
void ui_chat_load_model(ui_chat *ch, const char *path);
void ui_chat_set_gen(ui_chat *ch, const eng_gen_params *g);
/* Edit and branch. ui_chat_edit picks the message `back` user messages
 * from the end (1: the last; -1: one further back than the one being
 * edited) and returns its text for the input, or NULL with a notice. The
 * next message sent replaces it: the old message and everything after it
 * stay in the journal as an earlier branch (superseded, shown dimmed and
 * left out of the model's context), the conversation goes on from the
 * new one. ui_chat_edit_cancel drops the edit. */
const char *ui_chat_edit(ui_chat *ch, int back);
void ui_chat_edit_cancel(ui_chat *ch);
const char *ui_chat_editing_text(const ui_chat *ch);
/* The same for a slider held or stepped in a run: during a reply the
 * engine gets the value once the steps pause (UI_GEN_SETTLE_MS), so
 * three quick steps leave one mark in the reply, not three; idle, at
 * once. ch->gen shows the new value meanwhile. */
#define UI_GEN_SETTLE_MS 300
void ui_chat_set_gen_soon(ui_chat *ch, const eng_gen_params *g);
void ui_chat_set_kernel(ui_chat *ch, const char *name);
void ui_chat_set_threads(ui_chat *ch, int n);
/* Speculative decoding: draft model path (NULL: none) and lookup length
 * (0: off); both off: plain decoding. */
void ui_chat_set_spec(ui_chat *ch, const char *draft, int lookup);
/* The draft model the menu can turn on or off for the model in use: the
 * one running, else the one its settings name; NULL: none. */
const char *ui_chat_draft_known(const ui_chat *ch);
/* A message shown in the conversation but never saved. */
void ui_chat_notice(ui_chat *ch, const char *fmt, ...) ENG_PRINTF(2, 3);
/* The same for something that failed: marked (meta "level" = "error") so
 * a front end can show it as an error without reading its words. */
void ui_chat_error(ui_chat *ch, const char *fmt, ...) ENG_PRINTF(2, 3);
/* 1 when the conversation's entry i is such an error notice. */
int ui_chat_is_error(const ui_chat *ch, size_t i);
/* The help text (slash commands). */
const char *ui_chat_help(void);

/* Files in the conversations folder, newest first: names (caller frees
 * each and the array); returns the count. */
int ui_chat_list(const ui_chat *ch, char ***names);

/* A saved conversation as the list shows it. */
typedef struct ui_conv {
    char name[128];
    long long mtime;       /* seconds since 1970 */
    int turns;             /* the user's messages */
    char model[128];       /* the model of its last reply ("" if none) */
    char model_file[1024];
    char first[128];       /* the first line of its first message */
    char error[160];       /* "" or why the file cannot be read (cut to fit) */
} ui_conv;
/* Every saved conversation, newest first, with its summary; *out is
 * malloc'ed (caller frees). Returns the count. */
int ui_chat_convs(const ui_chat *ch, ui_conv **out);
/* Keep only those whose name, model or first line contains q (any case). */
int ui_conv_filter(ui_conv *v, int n, const char *q);
/* Open a saved conversation (as /load): its turns go to the engine and its
 * model is reopened when it differs (or a notice says why it cannot be). */
int ui_chat_open(ui_chat *ch, const char *name, eng_err *e);
/* Rename or delete a saved conversation's file; the open one follows a
 * rename, and deleting the open one starts a new conversation. */
int ui_chat_conv_rename(ui_chat *ch, const char *from, const char *to, eng_err *e);
int ui_chat_conv_delete(ui_chat *ch, const char *name, eng_err *e);
/* Start a new conversation (as /new, /reset): the old file stays. */
void ui_chat_new(ui_chat *ch);
/* Write the conversation as markdown to path. */
int ui_chat_export(const ui_chat *ch, const char *path, eng_err *e);

/* What the screen says about a reply's thinking (entry i; see think.h
 * for the forms): "thought for 120 tokens", "thinking… 40 tokens" while
 * it is written, or "… words" when its token count was not recorded
 * (journal meta "think_tokens"). Returns 0 when the entry has none. */
int ui_chat_think_label(const ui_chat *ch, size_t i, char *buf, size_t cap);

/* The terminal sequence that puts text on the clipboard (OSC 52, base64;
 * tmux and most terminals take it, also over ssh). Caller frees; NULL
 * when out of memory. */
char *ui_osc52(const char *text, size_t n);

double ui_now_ms(void);

#endif
