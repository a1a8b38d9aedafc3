/* timebox.h - the public header of timebox, installed with the library: version macros, and
 * the deadline API (timebox_deadline_begin(3)) for programs that can be changed a little. */
#ifndef TIMEBOX_H
#define TIMEBOX_H

#define TIMEBOX_VERSION_MAJOR 0
#define TIMEBOX_VERSION_MINOR 1
#define TIMEBOX_VERSION_PATCH 0
#define TIMEBOX_VERSION "0.1.0"

/* A number that compares in order: TIMEBOX_VERSION_NUMBER >= TIMEBOX_MAKE_VERSION(0, 1, 0). */
#define TIMEBOX_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define TIMEBOX_VERSION_NUMBER                                                              \
	TIMEBOX_MAKE_VERSION(TIMEBOX_VERSION_MAJOR, TIMEBOX_VERSION_MINOR, TIMEBOX_VERSION_PATCH)

/*
 * The deadline API. A program marks the deadline of the work its thread does now (an
 * event-loop server, its own request): every call the preloaded library governs on that
 * thread gets min(its own deadline, this one), and a call begun after it fails at once with
 * ETIMEDOUT, nothing sent. Deadlines nest: the smaller wins, and end() restores the
 * enclosing one. Per thread; not async-signal-safe.
 *
 * The functions are resolved at run time in the library timebox preloads (dlsym, once per
 * function and translation unit): a program built with this header needs no link to the
 * library and runs unchanged without it - begin() then returns 0 and does nothing,
 * remaining() returns -1. glibc 2.34 and later have dlsym in libc; older ones need -ldl.
 *
 *   int  timebox_deadline_begin(long ms)  0, or -1 with errno EINVAL for ms < 0
 *   void timebox_deadline_end(void)       ends the innermost begin (none: nothing)
 *   long timebox_remaining_ms(void)       ms left (0: spent), -1 without a deadline
 */
#include <dlfcn.h>

#ifndef RTLD_DEFAULT
#define RTLD_DEFAULT ((void *)0) /* glibc and musl; <dlfcn.h> names it under _GNU_SOURCE */
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*timebox__begin_fn)(long);
typedef void (*timebox__end_fn)(void);
typedef long (*timebox__remaining_fn)(void);

/* The fallbacks when the library is not preloaded. */
static inline int timebox__no_begin(long ms)
{
	(void)ms;
	return 0;
}

static inline void timebox__no_end(void)
{
}

static inline long timebox__no_remaining(void)
{
	return -1;
}

/* The library's function `name`, or NULL. Object to function pointer: POSIX allows it. */
static inline void *timebox__find(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

static inline int timebox_deadline_begin(long ms)
{
	static timebox__begin_fn fn;
	timebox__begin_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

	if (f == 0) {
		void *p = timebox__find("timebox_deadline_begin");

		f = p != 0 ? __extension__(timebox__begin_fn) p : timebox__no_begin;
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f(ms);
}

static inline void timebox_deadline_end(void)
{
	static timebox__end_fn fn;
	timebox__end_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

	if (f == 0) {
		void *p = timebox__find("timebox_deadline_end");

		f = p != 0 ? __extension__(timebox__end_fn) p : timebox__no_end;
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	f();
}

static inline long timebox_remaining_ms(void)
{
	static timebox__remaining_fn fn;
	timebox__remaining_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

	if (f == 0) {
		void *p = timebox__find("timebox_remaining_ms");

		f = p != 0 ? __extension__(timebox__remaining_fn) p : timebox__no_remaining;
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f();
}

#ifdef __cplusplus
}
#endif

#endif
