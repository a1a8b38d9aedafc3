/* fuzz.h - what the libFuzzer targets share: the entry point's prototype, a NUL-terminated
 * heap copy of the input (so that ASan sees any read past its end), and a checked invariant. */
#ifndef TB_FUZZ_H
#define TB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * An invariant: when it fails, the target says which one and aborts, which libFuzzer takes
 * for a crash (it saves the input as an artifact and stops with a non-zero status).
 */
#define FUZZ_CHECK(cond, ...)                                                              \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, \
				#cond);                                                    \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			abort();                                                           \
		}                                                                          \
	} while (0)

/* The `size` bytes at data as a string of exactly that many bytes plus a NUL, on the heap
 * (free it). An embedded NUL ends the string early, as it would in an environment value. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s == NULL)
		abort();
	if (size > 0)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

#endif
