/* hooks.h - what the exported hook files share: visibility and branch hints.
 * The hooks themselves are thin; their bodies live in xfer.c, wait.c and the policy modules. */
#ifndef TB_HOOKS_H
#define TB_HOOKS_H

#define TB_EXPORT __attribute__((visibility("default")))
#define TB_LIKELY(x) __builtin_expect(!!(x), 1)
#define TB_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
