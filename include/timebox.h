/* timebox.h - the public header of timebox, installed with the library.
 * This release declares version macros only: timebox governs programs through LD_PRELOAD
 * (see timebox(1)), and a program needs no header for that. */
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

#endif
