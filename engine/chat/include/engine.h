/* The engine thread: owns the model, its session (KV cache, sampler, worker
 * pool) and the conversation as the model sees it. Front ends talk to it
 * only through two queues: commands in, events out (DESIGN.md, "Threads
 * and the message queue"). Nothing else is shared.
 *
 * Payload ownership: a command's or event's text (and an event's state)
 * is heap memory that moves with the message; the receiver frees it
 * (eng_cmd_free / eng_event_free). */
#ifndef NIBBLE_ENG_ENGINE_H
#define NIBBLE_ENG_ENGINE_H

#include <stdint.h>

#include "err.h"
#include "queue.h"
#include "sampler.h"

enum eng_cmd_type {
    ENG_CMD_LOAD = 1,    /* text: model path; n: n_ctx (0 default); n2: threads (0 default);
                            name: template ("" or "auto": from the file); kv_type: the K and
                            V cache types ("f16", "q8_0", "q4_0"; "": f16) */
    ENG_CMD_SUBMIT,      /* text: the user's message; a reply follows */
    ENG_CMD_STOP,        /* end the reply in progress, keeping what was written */
    ENG_CMD_RESET,       /* forget the conversation (the system prompt stays) */
    ENG_CMD_REGENERATE,  /* drop the last reply and answer the last message again */
    ENG_CMD_SET_KERNEL,  /* name: kernel set; applied between tokens */
    ENG_CMD_SET_THREADS, /* n: worker threads (0: physical cores); between tokens */
    ENG_CMD_SET_SAMPLER, /* gen: takes effect at the next sampled token */
    ENG_CMD_SET_SYSTEM,  /* text: system prompt (NULL or "": none); from the next turn */
    ENG_CMD_ADD_TURN,    /* n: role (ENG_ROLE_*), text: a past turn (resume); no reply */
    ENG_CMD_SET_DELAY,   /* n: pause after each reply token, ms (tests and demos) */
    ENG_CMD_QUIT,
    ENG_CMD_SET_CHAT_TEMPLATE, /* text: Jinja chat template used instead of the file's (NULL or "": the
                                  file's own); takes effect at the next LOAD */
    ENG_CMD_SET_THINKING,      /* n: enable_thinking for the template: 1 on, 0 off, -1 not passed;
                                  from the next turn */
    ENG_CMD_DROP_TURNS,        /* n: forget the last n user turns and all after them (an edited
                                  message); the turns before keep their token ids, and the cache
                                  its common prefix */
    ENG_CMD_SET_SPEC           /* speculative decoding (spec.h), between tokens: text: draft model
                                  path (NULL or "": none); n: lookup n-gram length (0: off); n2:
                                  tokens drafted per check (0: 8). Neither: plain decoding. A
                                  new model (LOAD) turns it off. */
};

enum eng_role { ENG_ROLE_USER = 1, ENG_ROLE_ASSISTANT = 2 };

/* Generation settings: the sampler plus the reply length cap. */
typedef struct eng_gen_params {
    eng_sampler_params sp;
    int32_t max_tokens; /* per reply; <= 0: until end of turn or context */
} eng_gen_params;

typedef struct eng_cmd {
    enum eng_cmd_type type;
    char *text;        /* heap, owned by the message (NULL if unused) */
    char name[32];     /* kernel or template name */
    char kv_type[2][8];/* LOAD: K and V cache type names */
    int n, n2;
    eng_gen_params gen;
} eng_cmd;

/* Events carry small per-type payloads. The full state (model, template,
 * kernel, sampler, ...) travels only with the three events that report
 * it, as heap memory owned by the message; a TOKEN is the fixed part
 * (sizeof(eng_event): 88 bytes on 64-bit, was 1,440 with the state
 * inside) plus a few bytes of text. */
enum eng_ev_type {
    ENG_EV_LOADED = 1, /* state: the new model and settings */
    ENG_EV_PROGRESS,   /* progress: loading or a long prompt */
    ENG_EV_TOKEN,      /* text: bytes of whole UTF-8 characters of the reply; n_tokens */
    ENG_EV_STATS,      /* stats: figures of the reply so far */
    ENG_EV_DONE,       /* code: enum eng_done; stats: the reply's final figures */
    ENG_EV_ERROR,      /* code: the command type that failed; err: ENG_E* code; text: message */
    ENG_EV_NOTICE,     /* code: enum eng_notice; text: the same for display */
    ENG_EV_MARK,       /* text: a setting changed mid-reply; mark_token: at which reply token */
    ENG_EV_STATE,      /* state: settings changed (kernel, threads, sampler, system, reset) */
    ENG_EV_REPLY       /* state: a reply starts with these settings (provenance) */
};

enum eng_done { ENG_DONE_EOG = 1, ENG_DONE_STOPPED, ENG_DONE_MAX_TOKENS, ENG_DONE_CONTEXT, ENG_DONE_ERROR };

/* What a NOTICE is about, so a front end decides by code (show, save,
 * colour) and shows the text as it comes. */
enum eng_notice {
    ENG_NOTICE_CONTEXT_SHIFT = 1, /* the oldest turns left the model's memory (system prompt stays) */
    ENG_NOTICE_TMPL_UNKNOWN,      /* LOAD named a template that does not exist; the model's own is used */
    ENG_NOTICE_TMPL_NONE,         /* the model has no chat template: plain continuation */
    ENG_NOTICE_TMPL_UNRECOGNISED, /* its chat template is none nibble knows: plain continuation */
    ENG_NOTICE_TMPL_ERROR,        /* the Jinja chat template failed (the text names the line); the
                                     detected family's layout is used from then on */
    ENG_NOTICE_SPEC_OFF           /* a new model was loaded: speculative decoding is off */
};

/* Error codes of the engine beyond err.h's (ENG_EV_ERROR's err). */
enum { ENG_ENOMODEL = -30, /* a command needs a model and none is loaded */
       ENG_EBUSY = -31,    /* too many commands waited for a reply to end; this one was dropped */
       ENG_ETOOLONG = -32  /* SUBMIT: the message alone does not fit the context; refused, nothing dropped */ };

enum eng_stage { ENG_STAGE_LOAD = 1, ENG_STAGE_PREFILL };

typedef struct eng_progress {
    enum eng_stage stage;
    double fraction;     /* 0..1 */
    double eta_s;        /* seconds left (0: unknown); for a prefill, from a fit of
                          * time per token against its position, since each
                          * token's attention reads every key before it */
    uint32_t ctx_used;   /* PREFILL: tokens in the context so far */
    double tps;          /* PREFILL: prompt tokens per second so far */
} eng_progress;

typedef struct eng_stats {
    double prefill_tps;  /* prompt tokens per second of the last prefill (0: none) */
    double decode_tps;   /* reply tokens per second so far */
    double ttft_ms;      /* submit to first reply token */
    double gen_ms;       /* time spent generating this reply */
    uint32_t n_prompt;   /* tokens prefilled for this reply */
    uint32_t n_gen;      /* reply tokens so far */
    uint32_t ctx_used, ctx_size;
    float accept;        /* speculative decoding: share of this reply's drafted tokens kept (-1: off) */
    uint32_t checks;     /* speculative: the model's batched checks (forward passes) in this reply */
    double plain_tps;    /* speculative: plain decode tokens per second on this model, from the checks
                          * that drafted nothing (each one token through the model, as plain decoding),
                          * timed since speculation was turned on; 0: too few yet */
} eng_stats;

typedef struct eng_state {
    char model_path[1024];
    char model_name[128];
    char arch[32];
    char weight_type[16];
    char fingerprint[24]; /* 64-bit hash of size + first/middle/last MiB, hex */
    uint64_t file_size, n_params;
    char tmpl[16];        /* template in use: "jinja" (the file's own, or a --chat-template-file), or a family */
    int tmpl_from_file;   /* 1: tokenizer.chat_template (run, or its family detected); 2: a template given */
    int thinking;         /* enable_thinking passed to the template: 1, 0, or -1 (not passed) */
    char kernel[24];
    int threads;
    uint32_t ctx_size;
    char cache_k[8], cache_v[8]; /* the K and V cache types ("f16", "q8_0", "q4_0") */
    uint64_t kv_bytes;    /* the context's K and V caches (allocated) */
    eng_gen_params gen;
    int has_system;
    char draft[1024];     /* speculative decoding: the draft model's path ("": none) */
    int lookup;           /* prompt lookup n-gram length (0: off) */
    int draft_max;        /* tokens drafted per check */
} eng_state;

typedef struct eng_event {
    enum eng_ev_type type;
    int code;             /* DONE, ERROR, NOTICE: see the type; else 0 */
    char *text;           /* heap, owned by the message (NULL if unused) */
    eng_state *state;     /* heap, owned by the message: LOADED, STATE, REPLY
                             (NULL if memory ran out); else NULL */
    union {               /* which member is set follows from type */
        eng_stats stats;       /* STATS, DONE */
        eng_progress progress; /* PROGRESS */
        uint32_t mark_token;   /* MARK */
        uint32_t n_tokens;     /* TOKEN: the reply's tokens so far, these bytes' own included */
        int err;               /* ERROR */
    };
} eng_event;

void eng_cmd_free(eng_cmd *c);     /* frees the payload, not c */
void eng_event_free(eng_event *ev); /* frees text and state, not ev */
const char *eng_done_name(int reason); /* "end of turn", "stopped", ... */
const char *eng_stage_name(int stage); /* "load", "prefill" */

/* Generation defaults: eng_sampler_defaults() and a reply cap of 512
 * tokens. The engine starts with them; front ends show them. */
eng_gen_params eng_gen_defaults(void);

typedef struct eng_engine eng_engine;

/* Start the engine thread with no model; send ENG_CMD_LOAD first. */
int eng_engine_start(eng_engine **out, eng_err *e);
/* Send QUIT, wait for the thread, free both queues. Accepts NULL. */
void eng_engine_stop(eng_engine *en);

/* Queue a command without waiting. On 0 the message (and its text) now
 * belongs to the engine; on ENG_EAGAIN (queue full) the caller keeps it. */
int eng_engine_send(eng_engine *en, eng_cmd *c);
/* Convenience senders; text is copied. */
int eng_engine_send_simple(eng_engine *en, enum eng_cmd_type type, const char *text, int n);
/* Next event: wait_ms -1 waits, 0 polls. 0, ENG_EAGAIN, or ENG_ECLOSED
 * once the engine has quit and every event was taken. */
int eng_engine_poll(eng_engine *en, eng_event *ev, int wait_ms);
/* Readable while events wait: poll it together with the terminal. -1 on
 * Windows (see eng_queue_fd). */
int eng_engine_fd(const eng_engine *en);
/* 1 once an event waits or the engine has quit, 0 after wait_ms (-1:
 * no limit). Takes nothing; for the thread that polls. */
int eng_engine_wait(eng_engine *en, int wait_ms);

#endif
