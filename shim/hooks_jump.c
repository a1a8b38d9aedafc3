/* hooks_jump.c - longjmp, _longjmp, siglongjmp, __longjmp_chk: a signal handler that jumps
 * out of a governed wait (the alarm() timeout idiom) ends the waits its thread recorded. */
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "hooks.h"
#include "resolve.h"
#include "sock.h"
#include "waits.h"

/* FORTIFY builds call it through a redirect of longjmp; no header declares the name. */
void __longjmp_chk(sigjmp_buf env, int val) __attribute__((noreturn));

typedef void (*jump_fn)(struct __jmp_buf_tag *, int);

/*
 * The four names are not in tb_real: no system call can stand in for a jump, so there is
 * no boot stub to start from. They are bound by the constructor below and, when a jump
 * comes first (another library's constructor), at that jump. glibc's three unchecked
 * names are one function; a libc without __longjmp_chk (musl) gets longjmp for it, as a
 * program built against that libc never calls it anyway.
 */
enum { J_LONGJMP, J_ULONGJMP, J_SIGLONGJMP, J_CHK, J_N };

static const char *const jump_names[J_N] = { "longjmp", "_longjmp", "siglongjmp",
					     "__longjmp_chk" };
static _Atomic(jump_fn) jumps[J_N];

/* timebox's own address range, [lo, hi) of its loaded segments: a symbol scan by dladdr of
 * each name's libc address would cost tens of thousands of instructions at every start. */
struct range {
	uintptr_t lo, hi;
};
static struct range self;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range seen = { UINTPTR_MAX, 0 };
	uintptr_t here = (uintptr_t)&self;
	bool ours = false;

	(void)size;
	(void)arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD)
			continue;
		seen.lo = lo < seen.lo ? lo : seen.lo;
		seen.hi = hi > seen.hi ? hi : seen.hi;
		ours |= here >= lo && here < hi;
	}
	if (ours)
		self = seen;
	return ours;
}

/* The next definition of name after timebox, or NULL (none, or timebox itself: forwarding
 * there would recurse). */
static jump_fn lookup(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (self.hi == 0)
		dl_iterate_phdr(find_self, NULL);
	if ((uintptr_t)p >= self.lo && (uintptr_t)p < self.hi)
		p = NULL;
	return (jump_fn)p;
}

static void bind_jump(int i)
{
	jump_fn f = lookup(jump_names[i]);

	if (f == NULL && i != J_LONGJMP)
		f = lookup(jump_names[J_LONGJMP]);
	if (f != NULL)
		atomic_store_explicit(&jumps[i], f, memory_order_relaxed);
}

/* At load time, so that a jump out of a handler (not async-signal-safe territory for dlsym)
 * finds its function bound. */
__attribute__((constructor)) static void bind_jumps(void)
{
	for (int i = 0; i < J_N; i++)
		bind_jump(i);
}

/* Ends the thread's recorded waits and gives up a lookup it waited for, then jumps. Never returns; aborts only when no libc
 * function of that name exists at all, which a program that called it cannot meet. */
static __attribute__((noreturn)) void jump(int i, struct __jmp_buf_tag *env, int val)
{
	jump_fn f = atomic_load_explicit(&jumps[i], memory_order_relaxed);

	tb_waits_abandon();
	tb_sock_busy_abandon();
	tb_resolve_pool_jumped();
	if (TB_UNLIKELY(f == NULL)) {
		bind_jump(i);
		f = atomic_load_explicit(&jumps[i], memory_order_relaxed);
		if (f == NULL)
			abort();
	}
	f(env, val);
	__builtin_unreachable();
}

TB_EXPORT void longjmp(jmp_buf env, int val)
{
	jump(J_LONGJMP, env, val);
}

TB_EXPORT void _longjmp(jmp_buf env, int val)
{
	jump(J_ULONGJMP, env, val);
}

TB_EXPORT void siglongjmp(sigjmp_buf env, int val)
{
	jump(J_SIGLONGJMP, env, val);
}

/* glibc's check (the target frame lies above the caller's, or on the signal stack) still
 * holds from here: this frame is below the caller's. */
TB_EXPORT void __longjmp_chk(sigjmp_buf env, int val)
{
	jump(J_CHK, env, val);
}
