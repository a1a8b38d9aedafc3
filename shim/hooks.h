/* hooks.h - what the exported hook files share: visibility and branch hints.
 * The hooks themselves are thin; their bodies live in xfer.c, wait.c and the policy modules. */
#ifndef TB_HOOKS_H
#define TB_HOOKS_H

#define TB_EXPORT __attribute__((visibility("default")))
#define TB_LIKELY(x) __builtin_expect(!!(x), 1)
#define TB_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* A governed socket's body, kept out of the hook so the untracked path stays a few
 * instructions (no frame, no saved registers). */
#define TB_SLOW __attribute__((noinline))

#endif
